import { LockConfigurationError } from '../../core/errors.ts'
import { nameTooLong, utf8LengthOver } from '../../support/lock-request.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'

// Java ShedLock's lock entities in Google Cloud Datastore (and Firestore in Datastore mode): the
// kind, the property names and types, the longest name a key holds, and what the client's errors
// mean. The provider, the inspector and the CLI read it from here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 'datastore'

/** Java ShedLock's default kind (`DatastoreLockProvider.Configuration`'s `entityName`). */
export const DEFAULT_KIND = 'lock'

/** Java ShedLock's default property names: timestamps `lock_until`, `locked_at`, and the string `locked_by`. */
export const LOCK_UNTIL = 'lock_until'
export const LOCKED_AT = 'locked_at'
export const LOCKED_BY = 'locked_by'
/**
 * The entity's fencing counter, an integer: shedlock's own property. Java ShedLock neither reads
 * nor advances it, and keeps it, as its updates rebuild the entity from the one they read.
 */
export const FENCING_TOKEN = 'fencing_token'

// A key's name is at most 1500 bytes of UTF-8; names of the form __*__ are reserved by Datastore.
const MAX_NAME_BYTES = 1500
const RESERVED = /^__.*__$/s

/**
 * The part of a `@google-cloud/datastore` (10.x) `Key` the provider reads: entities come back with
 * one under the client's `KEY` symbol.
 */
export interface DatastoreKey {
  readonly name?: string | undefined
  readonly kind: string
}

/** An entity to write: its key and its properties (`Date`s are stored as timestamps, as Java's `Timestamp`s). */
export interface DatastoreEntityWrite {
  key: DatastoreKey
  data: Record<string, unknown>
}

/** The part of a `@google-cloud/datastore` `Transaction` the provider and inspector call. */
export interface DatastoreTransaction {
  run(): Promise<unknown>
  // Keys as the client types them (one or several), so that its Transaction fits.
  get(key: DatastoreKey | DatastoreKey[], options: { wrapNumbers: boolean }): Promise<readonly unknown[]>
  insert(entity: DatastoreEntityWrite): void
  update(entity: DatastoreEntityWrite): void
  delete(key: DatastoreKey | DatastoreKey[]): void
  commit(): Promise<unknown>
  rollback(): Promise<unknown>
}

/** The part of a `@google-cloud/datastore` `Query` the inspector builds. */
export interface DatastoreQuery {
  filter(property: string, operator: string, value: unknown): DatastoreQuery
  order(property: string): DatastoreQuery
  limit(count: number): DatastoreQuery
  start(cursor: string): DatastoreQuery
}

/**
 * The part of a `@google-cloud/datastore` (10.x) `Datastore` client that the provider and the
 * inspector call: pass your `new Datastore({ projectId })` as it is. The client honours
 * `DATASTORE_EMULATOR_HOST` by itself.
 */
export interface DatastoreClient {
  /** The symbol under which entities carry their key. */
  readonly KEY: symbol
  key(options: { namespace?: string; path: string[] }): DatastoreKey
  transaction(): DatastoreTransaction
  get(key: DatastoreKey | DatastoreKey[], options: { wrapNumbers: boolean }): Promise<readonly unknown[]>
  /** The client's namespace, which the provider uses unless given another. */
  readonly namespace?: string | undefined
  /** A query of `kind` in `namespace` (`''`: the default namespace). */
  createQuery(namespace: string, kind: string): DatastoreQuery
  runQuery(
    query: DatastoreQuery,
    options: { wrapNumbers: boolean },
  ): Promise<readonly [unknown[], { moreResults?: string; endCursor?: string }]>
  /** Wraps a decimal string as an integer value, so that counters beyond 2^53 keep their digits. */
  int(value: string): unknown
}

/** Where the locks live: the client, the kind and the namespace. */
export interface LockSpace {
  readonly datastore: DatastoreClient
  readonly kind: string
  readonly namespace: string | undefined
}

/** The key of lock `name`: `[kind, name]` in the namespace (the client's default namespace when undefined). */
export function lockKey(space: LockSpace, name: string): DatastoreKey {
  return space.datastore.key(
    space.namespace === undefined
      ? { path: [space.kind, name] }
      : { namespace: space.namespace, path: [space.kind, name] },
  )
}

/**
 * Checks `name` before anything is sent.
 * @throws LockConfigurationError for a name over 1500 bytes of UTF-8 or one of Datastore's reserved `__…__` names.
 */
export function checkName(name: string): void {
  const bytes = utf8LengthOver(name, MAX_NAME_BYTES)
  if (bytes !== undefined)
    throw nameTooLong(PROVIDER, name, bytes, MAX_NAME_BYTES, 'bytes', "the name, the entity key's name,")
  if (RESERVED.test(name)) {
    throw new LockConfigurationError(
      `${PROVIDER}: lock name "${name}" is reserved by Datastore (key names of the form __…__ are); rename the lock`,
    )
  }
}

/**
 * Checks the client, the kind and the namespace of a provider's or inspector's options.
 * @throws LockConfigurationError for a missing client, or a kind or namespace Datastore refuses.
 */
export function checkSpace(options: { datastore?: unknown; kind?: unknown; namespace?: unknown }): LockSpace {
  const { datastore, kind = DEFAULT_KIND, namespace } = options ?? {}
  const client = datastore as Partial<DatastoreClient> | undefined
  if (!client || typeof client.key !== 'function' || typeof client.transaction !== 'function') {
    throw new LockConfigurationError(
      "datastore: pass your client as { datastore }, e.g. new Datastore({ projectId: 'my-project' }) from @google-cloud/datastore",
    )
  }
  if (typeof kind !== 'string' || kind === '' || RESERVED.test(kind) || Buffer.byteLength(kind) > MAX_NAME_BYTES) {
    throw new LockConfigurationError(
      `datastore: kind must be a Datastore kind name of 1 to 1500 bytes, not of the form __…__ (Java ShedLock's is "lock"), got ${JSON.stringify(kind)}`,
    )
  }
  if (namespace !== undefined && (typeof namespace !== 'string' || !/^[0-9A-Za-z._-]{0,100}$/.test(namespace))) {
    throw new LockConfigurationError(
      `datastore: namespace must be up to 100 letters, digits, '.', '_' or '-' (empty: the default namespace), got ${JSON.stringify(namespace)}`,
    )
  }
  // Keys built from { path } alone have no namespace: the client's own applies only when named.
  const resolved = namespace ?? (typeof client.namespace === 'string' ? client.namespace : undefined)
  return { datastore: client as DatastoreClient, kind, namespace: resolved === '' ? undefined : resolved }
}

/** A timestamp property as epoch ms, or `undefined` when it is missing or not a timestamp. */
export function timeOf(value: unknown): number | undefined {
  return value instanceof Date && !Number.isNaN(value.getTime()) ? value.getTime() : undefined
}

/** What `shedlock schema datastore` prints: the entity format (Datastore creates a kind with its first entity). */
export function datastoreSchema(kind: string = DEFAULT_KIND): string {
  return [
    `# Nothing to create: Datastore creates kind "${kind}" with its first entity.`,
    `# One entity per lock, key [${JSON.stringify(kind)}, <lock name>] (Java ShedLock's format):`,
    `#   ${LOCK_UNTIL}: timestamp, ${LOCKED_AT}: timestamp, ${LOCKED_BY}: string, ${FENCING_TOKEN}: integer (shedlock's own)`,
    `# The run history (datastoreRunLedger): an entity per task, key ["shedlock_run_task", <name>], and its`,
    `# runs in its entity group, keys [..., "shedlock_run", <run key>]; no index needed.`,
  ].join('\n')
}

// gRPC status codes the client's errors carry.
const UNREACHABLE = new Set([4, 14]) // DEADLINE_EXCEEDED, UNAVAILABLE
const ABORTED = 10

/** Did a commit fail because another transaction touched the entity first (optimistic concurrency)? */
export function isContention(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  // ALREADY_EXISTS: an insert lost to a concurrent one outside a transaction's reach.
  return code === ABORTED || code === 6
}

/** What a `@google-cloud/datastore` error means for the lock (or the listing) and what to do about it. */
export function describeDatastoreError(where: string): DescribeStoreError {
  return (error, action, lockName) => {
    const code = (error as { code?: unknown } | null)?.code
    const detail = redactUrlPasswords(messageOf(error))
    let advice: string
    if (typeof code === 'number' && UNREACHABLE.has(code)) {
      advice = `Datastore is unreachable (${detail}); ${outcomeOf(action)}. Check the network (or DATASTORE_EMULATOR_HOST); the provider recovers by itself once it is back`
    } else if (code === ABORTED) {
      advice = `too much contention on ${where} (${detail}); ${outcomeOf(action)}. Another node kept changing the same entity; the next attempt usually succeeds`
    } else if (code === 7 || code === 16 || /default credentials/i.test(detail)) {
      advice = `the client may not ${action === 'list' || action === 'inspect' ? 'read' : 'write'} ${where} (${detail}); give its service account the Cloud Datastore User role, or set DATASTORE_EMULATOR_HOST for the emulator`
    } else if (code === 5) {
      advice = `the project or database was not found (${detail}); check projectId and databaseId of the Datastore client`
    } else {
      advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}

/** How messages name the lock kind. */
export function kindLabel(space: LockSpace): string {
  return `kind "${space.kind}"${space.namespace === undefined ? '' : ` in namespace "${space.namespace}"`}`
}
