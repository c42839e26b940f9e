// shedlock/mongodb: the provider, the inspector, and the lock document shared with Java ShedLock.
export type { MongoLockDocument } from './format.ts'
export { type MongoInspectorCollection, type MongoLockInspectorOptions, mongoLockInspector } from './inspector.ts'
export { type MongoLockCollection, type MongoLockProviderOptions, mongoLockProvider } from './provider.ts'
