import { LockConfigurationError } from '../../core/errors.ts'
import { awsCommandLoader } from '../../support/aws-sdk.ts'

// The AWS SDK v3 S3 client as the provider and the inspector use it: the client's one method,
// the command classes (imported on first use, or passed as `lib`), and the inputs they take.

const SDK = '@aws-sdk/client-s3'

/**
 * The part of an AWS SDK v3 `S3Client` (`@aws-sdk/client-s3` 3.x) that shedlock calls:
 * `send(command)`. We don't import the SDK statically; pass your client as it is.
 */
export interface S3SendClient {
  send(command: object): Promise<unknown>
}

/** The input of `PutObjectCommand` that shedlock builds: a lock object, written on a condition. */
export interface S3PutObjectInput {
  Bucket: string
  Key: string
  Body: Uint8Array
  Metadata: Record<string, string>
  IfNoneMatch?: string
  IfMatch?: string
}

/** The input of `HeadObjectCommand` and of `DeleteObjectCommand` (`IfMatch` only on delete). */
export interface S3ObjectInput {
  Bucket: string
  Key: string
  IfMatch?: string
}

/** The input of `ListObjectsV2Command` that the inspector builds. */
export interface S3ListObjectsInput {
  Bucket: string
  Prefix: string
  ContinuationToken?: string
}

/**
 * The command classes used, as `@aws-sdk/client-s3` exports them. Pass the module as `lib`
 * when it cannot be imported by name (bundlers, several SDK copies):
 * `import * as lib from '@aws-sdk/client-s3'`.
 */
export interface S3Lib {
  PutObjectCommand: new (input: S3PutObjectInput) => object
  HeadObjectCommand: new (input: S3ObjectInput) => object
  ListObjectsV2Command: new (input: S3ListObjectsInput) => object
  DeleteObjectCommand: new (input: S3ObjectInput) => object
}

/** @throws LockConfigurationError unless `client` has `send(command)`. */
export function checkClient(client: unknown): asserts client is S3SendClient {
  if (!client || typeof (client as Partial<S3SendClient>).send !== 'function') {
    throw new LockConfigurationError(
      's3: pass your S3Client (from @aws-sdk/client-s3) as client: an object with send(command)',
    )
  }
}

const COMMANDS = ['PutObjectCommand', 'HeadObjectCommand', 'ListObjectsV2Command', 'DeleteObjectCommand'] as const

/**
 * Returns a loader of the command classes: `lib` as given, or the SDK imported once, on first use.
 * @throws LockConfigurationError when `lib` lacks one of them.
 */
export function commandLoader(lib: S3Lib | undefined): () => Promise<S3Lib> {
  return awsCommandLoader('s3', SDK, () => import('@aws-sdk/client-s3'), lib, COMMANDS)
}

export { errorName, httpStatusOf as statusOf, SdkLoadError, sdkErrorDetail } from '../../support/aws-sdk.ts'
