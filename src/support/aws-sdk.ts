import { LockConfigurationError } from '../core/errors.ts'
import type { ClockReading } from './store-admin.ts'
import { messageOf } from './store-errors.ts'

// What the stores over an AWS SDK v3 client (DynamoDB, S3) share: the command classes, passed
// as `lib` or imported on first use, and the error when the SDK cannot be imported.

/**
 * Returns a loader of the command classes `needed` of the SDK package `sdk`: `lib` as given, or
 * `importSdk()` once, on first use (retried after a failure: the package may be installed while
 * the process runs).
 * @throws LockConfigurationError when `lib` lacks one of them, naming `store`.
 */
export function awsCommandLoader<L extends object>(
  store: string,
  sdk: string,
  importSdk: () => Promise<unknown>,
  lib: L | undefined,
  needed: readonly (keyof L & string)[],
): () => Promise<L> {
  if (lib !== undefined) {
    const missing = needed.filter((key) => typeof (lib as Partial<L> | null)?.[key] !== 'function')
    if (missing.length > 0) {
      throw new LockConfigurationError(
        `${store}: lib must be the ${sdk} module (import * as lib from '${sdk}'); it has no ${missing.join(', ')}`,
      )
    }
    return async () => lib
  }
  let loaded: Promise<L> | undefined
  return () => {
    loaded ??= importSdk().then((module) => {
      const found = module as Partial<L>
      const missing = needed.filter((key) => typeof found[key] !== 'function')
      if (missing.length > 0) throw new Error(`the module has no ${missing.join(', ')}`)
      return found as L
    })
    return loaded.catch((error: unknown) => {
      loaded = undefined
      throw new SdkLoadError(sdk, error)
    })
  }
}

/** The AWS SDK package could not be imported; `cause` says why. */
export class SdkLoadError extends Error {
  override name = 'SdkLoadError'
  constructor(sdk: string, cause: unknown) {
    super(
      `cannot load ${sdk} (${messageOf(cause)}); install the package (npm install ${sdk}) or pass its exports as { lib }: import * as lib from '${sdk}'`,
      {
        cause,
      },
    )
  }
}

/** The `name` of an SDK error (`ConditionalCheckFailedException`, `PreconditionFailed`...), if any. */
export function errorName(error: unknown): unknown {
  return (error as { name?: unknown } | null)?.name
}

/** The HTTP status of what an SDK v3 client threw, when the server answered. */
export function httpStatusOf(error: unknown): number | undefined {
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode
  return typeof status === 'number' ? status : undefined
}

/**
 * What an SDK error says, for messages: `Name (HTTP 500): message`. A server error whose body the
 * SDK cannot parse is `UnknownError: UnknownError`, which says nothing without its status.
 */
export function sdkErrorDetail(error: unknown): string {
  const name = errorName(error)
  const status = httpStatusOf(error)
  const message = messageOf(error)
  const label =
    `${typeof name === 'string' && name !== 'Error' ? name : ''}${status === undefined ? '' : ` (HTTP ${status})`}`.trim()
  if (label === '') return message
  return message === name || message === '' ? label : `${label}: ${message}`
}

/** An AWS SDK v3 client as the CLI's store admins use it: commands, `destroy()`, and a middleware for the Date header. */
export interface AwsAdminClient {
  send(command: object): Promise<unknown>
  destroy(): void
  middlewareStack: {
    add(
      middleware: (
        next: (args: object) => Promise<{ response?: unknown }>,
      ) => (args: object) => Promise<{ response?: unknown }>,
      options: { step: 'deserialize'; name: string },
    ): void
  }
}

/** The region of a CLI client: `?region=`, else the SDK's own lookup, except that a local endpoint (which ignores it) gets `us-east-1`, as the SDK refuses to start without one. */
export function adminRegion(fromUrl: string | undefined, endpoint: string | undefined): string | undefined {
  return fromUrl ?? (endpoint && !process.env.AWS_REGION && !process.env.AWS_DEFAULT_REGION ? 'us-east-1' : undefined)
}

/**
 * `doctor`'s clock reading for an AWS store, which has no clock to query: every reply carries the
 * server's time in its Date header (whole seconds). Adds a middleware to `client` that keeps the
 * last one; the reading sends `request()` and reads it.
 */
export function replyDateClock(
  client: AwsAdminClient,
  request: () => Promise<unknown>,
): () => Promise<ClockReading | string> {
  let replyDate: string | undefined
  client.middlewareStack.add(
    (next) => async (args) => {
      const result = await next(args)
      replyDate = (result.response as { headers?: Record<string, string> } | undefined)?.headers?.date ?? replyDate
      return result
    },
    { step: 'deserialize', name: 'shedlockReplyDate' },
  )
  return async () => {
    replyDate = undefined
    const before = Date.now()
    await request()
    const after = Date.now()
    const storeMs = replyDate === undefined ? Number.NaN : Date.parse(replyDate)
    if (Number.isNaN(storeMs)) return 'not measured: the reply had no Date header'
    return { storeMs, before, after, resolutionMs: 1000, source: 'the Date header of a reply (whole seconds)' }
  }
}
