import { LockConfigurationError } from '../../core/errors.ts'
import { type DescribeStoreError, messageOf, outcomeOf, storeError } from '../../support/store-errors.ts'
import type { LockRequest } from './object.ts'

// How the provider and the inspector reach the object: a stub's fetch(), one JSON operation each.

/** The provider's name, as messages and diagnostics give it. */
export const PROVIDER = 'cloudflare-do'

/** What a stub's `fetch()` resolves to: only `ok`, `status`, `json()` and `text()` are read. */
export interface DurableObjectLockResponse {
  readonly ok: boolean
  readonly status: number
  json(): Promise<unknown>
  text(): Promise<string>
}

/** The part of a `DurableObjectStub` that the provider calls. */
export interface DurableObjectLockStub {
  fetch(
    input: string,
    init: { method: string; body: string; headers: Record<string, string> },
  ): Promise<DurableObjectLockResponse>
}

/**
 * The part of a `DurableObjectNamespace` binding (`env.LOCKS`) that the provider and the inspector
 * call. We import no Workers types: pass the binding as it is.
 */
export interface DurableObjectLockNamespace {
  idFromName(name: string): unknown
  get(id: never): DurableObjectLockStub
}

/** Options shared by the provider and the inspector. */
export interface DurableObjectLockOptions {
  /** Your binding of {@link ShedLockDurableObject}, e.g. `env.LOCKS`. */
  namespace: DurableObjectLockNamespace
  /** The object that holds the locks (`idFromName(objectName)`): every lock of one object is served one request at a time. @default "shedlock" */
  objectName?: string
}

/** Sends one operation to the object; rejects when it does not answer 2xx. */
export type SendLockRequest = (request: LockRequest) => Promise<Record<string, unknown>>

/**
 * The sender to the object `objectName` of `namespace`.
 * @throws LockConfigurationError when `namespace` is not a Durable Object namespace binding or `objectName` is empty.
 */
export function lockObject(options: DurableObjectLockOptions): SendLockRequest {
  const { namespace, objectName = 'shedlock' } = options ?? {}
  if (!namespace || typeof namespace.idFromName !== 'function' || typeof namespace.get !== 'function') {
    throw new LockConfigurationError(
      'cloudflare-do: pass the binding of ShedLockDurableObject as { namespace }, e.g. env.LOCKS (an object with idFromName and get)',
    )
  }
  if (typeof objectName !== 'string' || objectName === '')
    throw new LockConfigurationError(
      `cloudflare-do: objectName must be a non-empty string, got ${JSON.stringify(objectName)}`,
    )
  // A stub is cheap and may break with the object's connection: a new one per request.
  return async (request) => {
    const stub = namespace.get(namespace.idFromName(objectName) as never)
    const response = await stub.fetch('https://shedlock.invalid/', {
      method: 'POST',
      body: JSON.stringify(request),
      headers: { 'content-type': 'application/json' },
    })
    if (!response.ok)
      throw new Error(`the object answered HTTP ${response.status}: ${(await response.text()).slice(0, 200)}`)
    const reply = (await response.json()) as Record<string, unknown>
    if (typeof reply.error === 'string')
      throw new Error(
        `the object refused the operation: ${reply.error}; deploy the ShedLockDurableObject of this shedlock version`,
      )
    return reply
  }
}

/** What a failed call means for the lock. */
export const describeObjectError: DescribeStoreError = (error, action, lockName) =>
  storeError(PROVIDER, action, lockName, `${messageOf(error)}; ${outcomeOf(action)}`, error)
