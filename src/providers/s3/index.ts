// shedlock/s3: the provider and the inspector, on lock objects shared with Java ShedLock.
export { type S3LockInspectorOptions, s3LockInspector } from './inspector.ts'
export { type S3LockProviderOptions, s3LockProvider } from './provider.ts'
export type { S3Lib, S3ListObjectsInput, S3ObjectInput, S3PutObjectInput, S3SendClient } from './sdk.ts'
