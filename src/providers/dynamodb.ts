import { setTimeout as sleep } from 'node:timers/promises'
import { type Clock, systemClock } from '../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { defineLock } from '../support/define-lock.ts'
import { lockOwner } from '../support/lock-owner.ts'

/**
 * The part of an AWS SDK v3 `DynamoDBClient` (`@aws-sdk/client-dynamodb` 3.x) that this provider
 * calls: `send(command)`. We don't import the SDK statically; pass your client as it is. A
 * `DynamoDBDocumentClient` is not one: it would re-marshal the attribute values.
 */
export interface DynamoDBSendClient {
  send(command: object): Promise<unknown>
}

/** A string attribute value, the only type the lock items use. */
export interface DynamoDBStringValue {
  S: string
}

/** The input of `UpdateItemCommand` that this provider builds. */
export interface DynamoDBUpdateItemInput {
  TableName: string
  Key: Record<string, DynamoDBStringValue>
  UpdateExpression: string
  ConditionExpression: string
  ExpressionAttributeValues: Record<string, DynamoDBStringValue>
}

/** The input of `CreateTableCommand` that {@link createDynamoDBLockTable} builds. */
export interface DynamoDBCreateTableInput {
  TableName: string
  KeySchema: { AttributeName: string; KeyType: 'HASH' }[]
  AttributeDefinitions: { AttributeName: string; AttributeType: 'S' }[]
  BillingMode: 'PAY_PER_REQUEST'
}

/**
 * The command classes used, as `@aws-sdk/client-dynamodb` exports them. Pass the module as
 * `lib` when it cannot be imported by name (bundlers, several SDK copies):
 * `import * as lib from '@aws-sdk/client-dynamodb'`.
 */
export interface DynamoDBLib {
  UpdateItemCommand: new (input: DynamoDBUpdateItemInput) => object
  DescribeTableCommand: new (input: { TableName: string }) => object
  CreateTableCommand: new (input: DynamoDBCreateTableInput) => object
}

/** Options of {@link dynamoDBLockProvider}. */
export interface DynamoDBLockProviderOptions {
  /**
   * Your `DynamoDBClient`. Give it request timeouts that throw (`requestHandler: {
   * connectionTimeout, requestTimeout, throwOnRequestTimeout: true }`; without the last, the
   * SDK only logs a warning), or a lock attempt may wait as long as the network does.
   */
  client: DynamoDBSendClient
  /** The lock table (create it with {@link createDynamoDBLockTable}); a table name or ARN. Java ShedLock's README calls it `Shedlock`. */
  tableName: string
  /** The table's partition key attribute (type S), which holds the lock name. @default "_id" */
  partitionKey?: string
  /**
   * Prefix of the `lockedBy` value. Each acquisition stores `<lockedBy>:<pid>:<random>`, so that
   * locks are owned per acquisition, never per host. @default the host name
   */
  lockedBy?: string
  /** The SDK's command classes. @default `await import('@aws-sdk/client-dynamodb')` on first use */
  lib?: DynamoDBLib
  /**
   * The clock that decides expiry. DynamoDB compares the stored `lockUntil` with the time this
   * process sends (a condition expression cannot read the server's clock), so nodes must keep
   * their clocks in sync. @default systemClock
   */
  clock?: Clock
}

/** Options of {@link createDynamoDBLockTable}. */
export interface CreateDynamoDBLockTableOptions {
  /** The partition key attribute, type S. @default "_id" */
  partitionKey?: string
  /** The SDK's command classes. @default `await import('@aws-sdk/client-dynamodb')` */
  lib?: DynamoDBLib
}

const PROVIDER = 'dynamodb'
const SDK = '@aws-sdk/client-dynamodb'
const DEFAULT_PARTITION_KEY = '_id'
const LOCK_ATTRIBUTES = ['lockUntil', 'lockedAt', 'lockedBy']
// Table names are 3-255 of [A-Za-z0-9_.-]; newer DynamoDB APIs also take the table's ARN.
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/
const TABLE_ARN = /^arn:[a-z-]+:dynamodb:[a-z0-9-]*:\d*:table\/[A-Za-z0-9_.-]{3,255}$/
// How long createDynamoDBLockTable waits for a new table to become ACTIVE.
const TABLE_WAIT_MS = 5 * 60_000

// Attribute names are plain (none is a DynamoDB reserved word); the values are ISO-8601 UTC
// strings with exactly three fraction digits, so `<=` and `>` on strings compare times, the way
// Java ShedLock compares them.
interface Statement {
  readonly update: string
  readonly condition: string
}
// Insert, or take over an expired lock (Java ShedLock's condition, in another order).
const ACQUIRE: Statement = { update: 'SET lockUntil = :lockUntil, lockedAt = :now, lockedBy = :owner', condition: 'attribute_not_exists(lockUntil) OR lockUntil <= :now' }
// Only the acquisition that holds the lock may move it; on a missing item the condition fails, so
// an unlock never recreates a deleted item.
const UNLOCK: Statement = { update: 'SET lockUntil = :lockUntil', condition: 'lockedBy = :owner' }
// Only a holder whose lock has not expired: after expiry another node may take it at any moment.
const EXTEND: Statement = { update: 'SET lockUntil = :lockUntil', condition: 'lockedBy = :owner AND lockUntil > :now' }

/**
 * Locks in a DynamoDB table in Java ShedLock's format: one item per lock, all attributes of type
 * S: the partition key (`_id`) holds the name, `lockUntil` and `lockedAt` are ISO-8601 UTC with
 * exactly three fraction digits (`2030-01-01T00:00:00.000Z`), `lockedBy` names the holder.
 * Extensible (Java ShedLock's DynamoDB provider is not).
 *
 * Acquire is one `UpdateItem` `SET lockUntil = :lockUntil, lockedAt = :now, lockedBy = :owner`
 * with the condition `attribute_not_exists(lockUntil) OR lockUntil <= :now`: it creates the item
 * or takes over an expired one, and a failed condition (`ConditionalCheckFailedException`) means
 * "held". Unlock (`lockedBy = :owner`) and extend (`lockedBy = :owner AND lockUntil > :now`) only
 * touch the lock this acquisition holds; Java ShedLock's unlock does not check the holder. An
 * item deleted by hand is recreated by the next acquire, and an unlock never recreates one. Lock
 * names are stored as they are: a partition key takes any string of 1 to 2048 bytes of UTF-8; a
 * longer name rejects with `LockProviderError`. Java ShedLock's optional sort key is not supported.
 *
 * `@aws-sdk/client-dynamodb` is imported on the first lock attempt, unless you pass `lib`; if it
 * cannot be loaded, `lock()` rejects with `LockProviderError` saying to install it or pass `lib`.
 *
 * Expiry is decided on this process's clock (see `clock`): keep the nodes' clocks in sync, and
 * use `lockAtLeastFor` to absorb small differences.
 *
 * ```ts
 * import { DynamoDBClient } from '@aws-sdk/client-dynamodb'
 * import { createDynamoDBLockTable, dynamoDBLockProvider } from 'shedlock/dynamodb'
 * const client = new DynamoDBClient({})
 * await createDynamoDBLockTable(client, 'Shedlock')
 * const provider = dynamoDBLockProvider({ client, tableName: 'Shedlock' })
 * ```
 *
 * @throws LockConfigurationError for a missing client, an invalid table name, a `partitionKey`
 *   that is empty or one of the lock attributes, an empty `lockedBy`, or a `lib` without the
 *   command classes.
 */
export function dynamoDBLockProvider(options: DynamoDBLockProviderOptions): ExtensibleLockProvider {
  const { client, tableName, lockedBy } = options ?? {}
  checkClient(client)
  checkTableName(tableName)
  const partitionKey = checkPartitionKey(options.partitionKey)
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(`dynamodb: lockedBy must be a non-empty string (it prefixes the lockedBy attribute), got ${JSON.stringify(lockedBy)}`)
  }
  const commands = commandLoader(options.lib, ['UpdateItemCommand'])
  const clock = options.clock ?? systemClock

  /** Runs one conditional update; resolves to `false` when its condition failed. */
  const update = async (name: string, statement: Statement, values: Record<string, string>): Promise<boolean> => {
    const { UpdateItemCommand } = await commands()
    const ExpressionAttributeValues: Record<string, DynamoDBStringValue> = {}
    for (const [key, S] of Object.entries(values)) ExpressionAttributeValues[key] = { S }
    try {
      await client.send(
        new UpdateItemCommand({
          TableName: tableName,
          Key: { [partitionKey]: { S: name } },
          UpdateExpression: statement.update,
          ConditionExpression: statement.condition,
          ExpressionAttributeValues,
        }),
      )
      return true
    } catch (error) {
      if ((error as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException') return false
      throw error
    }
  }

  const guard = async <T>(action: Action, name: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      throw describeDynamoError(error, `${action} lock "${name}"`, name, tableName, partitionKey)
    }
  }

  return {
    name: PROVIDER,
    async lock(configuration: LockConfiguration) {
      const owner = lockOwner(lockedBy)
      const acquired = await guard('acquire', configuration.name, () =>
        update(configuration.name, ACQUIRE, { ':lockUntil': iso(configuration.lockAtMostUntil.getTime()), ':now': iso(clock.now()), ':owner': owner }),
      )
      if (!acquired) return undefined
      return defineLock(configuration, {
        clock,
        unlock: async (current) => {
          // A failed condition means another node holds the lock by now (or the item is gone): leave it.
          const lockUntil = iso(Math.max(clock.now(), current.lockAtLeastUntil.getTime()))
          await guard('release', current.name, () => update(current.name, UNLOCK, { ':lockUntil': lockUntil, ':owner': owner }))
        },
        extend: (next) =>
          guard('extend', next.name, () => update(next.name, EXTEND, { ':lockUntil': iso(next.lockAtMostUntil.getTime()), ':now': iso(clock.now()), ':owner': owner })),
      })
    },
  }
}

/**
 * Creates the lock table if it does not exist: partition key `partitionKey` of type S, no sort
 * key, on-demand capacity (PAY_PER_REQUEST), the layout Java ShedLock's
 * `DynamoDBUtils.createLockTable` creates. Then waits until the table is ACTIVE (at most five
 * minutes). Idempotent, and safe to run from several nodes at once.
 *
 * @throws LockConfigurationError (rejects) for a missing client or an invalid table name or partition key.
 * @throws LockProviderError (rejects) when DynamoDB fails, when the table exists with another key
 *   schema, or when it is not ACTIVE within five minutes.
 */
export async function createDynamoDBLockTable(client: DynamoDBSendClient, tableName: string, options: CreateDynamoDBLockTableOptions = {}): Promise<void> {
  checkClient(client)
  checkTableName(tableName)
  const partitionKey = checkPartitionKey(options.partitionKey)
  const what = `create lock table "${tableName}"`
  const load = commandLoader(options.lib, ['DescribeTableCommand', 'CreateTableCommand'])
  const { DescribeTableCommand, CreateTableCommand } = await load().catch((error: unknown) => {
    throw describeDynamoError(error, what, undefined, tableName, partitionKey)
  })
  const fail = (advice: string, cause?: unknown): LockProviderError =>
    new LockProviderError(`dynamodb: could not ${what}: ${advice}`, cause === undefined ? { provider: PROVIDER } : { cause, provider: PROVIDER })

  const describe = async (): Promise<TableDescription | undefined> => {
    try {
      const reply = (await client.send(new DescribeTableCommand({ TableName: tableName }))) as { Table?: TableDescription } | undefined
      return reply?.Table ?? {}
    } catch (error) {
      if (errorName(error) === 'ResourceNotFoundException') return undefined
      throw describeDynamoError(error, what, undefined, tableName, partitionKey)
    }
  }

  const deadline = Date.now() + TABLE_WAIT_MS
  let pause = 100
  let checked = false
  for (;;) {
    const table = await describe()
    if (!table) {
      try {
        await client.send(
          new CreateTableCommand({
            TableName: tableName,
            KeySchema: [{ AttributeName: partitionKey, KeyType: 'HASH' }],
            AttributeDefinitions: [{ AttributeName: partitionKey, AttributeType: 'S' }],
            BillingMode: 'PAY_PER_REQUEST',
          }),
        )
      } catch (error) {
        // Another node created it a moment ago: wait for it like for ours.
        if (errorName(error) !== 'ResourceInUseException') throw describeDynamoError(error, what, undefined, tableName, partitionKey)
      }
    } else {
      if (!checked && table.KeySchema) {
        checkKeySchema(table, partitionKey, fail)
        checked = true
      }
      if (table.TableStatus === 'ACTIVE') return
    }
    if (Date.now() + pause > deadline) {
      throw fail(`the table is not ACTIVE after ${TABLE_WAIT_MS / 60_000} minutes (status ${table?.TableStatus ?? 'missing'}); check it in the AWS console and call createDynamoDBLockTable again`)
    }
    await sleep(pause)
    pause = Math.min(2_000, pause * 2)
  }
}

type Action = 'acquire' | 'extend' | 'release'

interface TableDescription {
  TableStatus?: string
  KeySchema?: { AttributeName?: string; KeyType?: string }[]
  AttributeDefinitions?: { AttributeName?: string; AttributeType?: string }[]
}

function checkKeySchema(table: TableDescription, partitionKey: string, fail: (advice: string) => LockProviderError): void {
  const keys = table.KeySchema ?? []
  const hash = keys.find((key) => key.KeyType === 'HASH')
  const type = table.AttributeDefinitions?.find((definition) => definition.AttributeName === hash?.AttributeName)?.AttributeType
  if (keys.length === 1 && hash?.AttributeName === partitionKey && type === 'S') return
  const actual = keys.map((key) => `${key.KeyType} "${key.AttributeName}"`).join(', ')
  throw fail(
    `the table exists with key schema ${actual || 'unknown'}${type ? ` (partition key type ${type})` : ''}, but ShedLock needs the partition key "${partitionKey}" of type S and no sort key. Pass the table's partition key as { partitionKey }, or use another table`,
  )
}

/** ISO-8601 UTC with exactly three fraction digits, Java ShedLock's `Utils.toIsoString`. */
function iso(ms: number): string {
  return new Date(ms).toISOString()
}

function checkClient(client: unknown): void {
  if (!client || typeof (client as Partial<DynamoDBSendClient>).send !== 'function') {
    throw new LockConfigurationError('dynamodb: pass your DynamoDBClient (from @aws-sdk/client-dynamodb) as client: an object with send(command)')
  }
}

function checkTableName(tableName: unknown): asserts tableName is string {
  if (typeof tableName !== 'string' || !(TABLE_NAME.test(tableName) || TABLE_ARN.test(tableName))) {
    throw new LockConfigurationError(
      `dynamodb: tableName ${JSON.stringify(tableName)} is not a DynamoDB table name; use 3 to 255 letters, digits, '_', '-' or '.' (e.g. "Shedlock"), or the table's ARN`,
    )
  }
}

function checkPartitionKey(partitionKey: unknown = DEFAULT_PARTITION_KEY): string {
  if (typeof partitionKey !== 'string' || partitionKey === '' || Buffer.byteLength(partitionKey) > 255) {
    throw new LockConfigurationError(`dynamodb: partitionKey must be an attribute name of 1 to 255 bytes, got ${JSON.stringify(partitionKey)}`)
  }
  if (LOCK_ATTRIBUTES.includes(partitionKey)) {
    throw new LockConfigurationError(`dynamodb: partitionKey cannot be "${partitionKey}": the lock item uses that attribute; keep the default "_id" or pick another name`)
  }
  return partitionKey
}

/** Returns a loader of the command classes: `lib` as given, or the SDK imported once, on first use. */
function commandLoader(lib: DynamoDBLib | undefined, needed: (keyof DynamoDBLib)[]): () => Promise<DynamoDBLib> {
  if (lib !== undefined) {
    const missing = needed.filter((key) => typeof (lib as Partial<DynamoDBLib> | null)?.[key] !== 'function')
    if (missing.length > 0) {
      throw new LockConfigurationError(`dynamodb: lib must be the ${SDK} module (import * as lib from '${SDK}'); it has no ${missing.join(', ')}`)
    }
    return async () => lib
  }
  let loaded: Promise<DynamoDBLib> | undefined
  return () => {
    loaded ??= import('@aws-sdk/client-dynamodb').then((module) => {
      const found = module as unknown as Partial<DynamoDBLib>
      const missing = needed.filter((key) => typeof found[key] !== 'function')
      if (missing.length > 0) throw new Error(`the module has no ${missing.join(', ')}`)
      return found as DynamoDBLib
    })
    return loaded.catch((error: unknown) => {
      // Not cached: the package may be installed while the process runs.
      loaded = undefined
      throw new SdkLoadError(error)
    })
  }
}

/** The SDK could not be imported; `cause` says why. */
class SdkLoadError extends Error {
  override name = 'SdkLoadError'
  constructor(cause: unknown) {
    super(`cannot load ${SDK} (${messageOf(cause)}); install the package (npm install ${SDK}) or pass its exports as { lib }: import * as lib from '${SDK}'`, { cause })
  }
}

function errorName(error: unknown): unknown {
  return (error as { name?: unknown } | null)?.name
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

// Socket-level failures the SDK passes on after its retries.
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'EPROTO'])
const UNREACHABLE_NAMES = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException', 'NetworkingError', 'ServiceUnavailable', 'InternalServerError'])
const THROTTLED = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded'])
const DENIED = new Set([
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'AccessDeniedException',
  'ExpiredTokenException',
  'CredentialsProviderError',
  'MissingAuthenticationTokenException',
])

/** Turns an SDK error into a `LockProviderError` that names the lock (when there is one) and says what to do. */
function describeDynamoError(error: unknown, what: string, lockName: string | undefined, tableName: string, partitionKey: string): LockProviderError {
  if (error instanceof LockProviderError) return error
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown }
  const detail = `${typeof name === 'string' && name !== 'Error' ? `${name}: ` : ''}${messageOf(error)}`
  let advice: string
  if (error instanceof SdkLoadError) {
    return new LockProviderError(`dynamodb: could not ${what}: ${error.message}`, lockName === undefined ? { cause: error.cause, provider: PROVIDER } : { cause: error.cause, provider: PROVIDER, lockName })
  } else if (name === 'ResourceNotFoundException') {
    advice = `table "${tableName}" does not exist in the client's account and region, or is not ACTIVE yet (${detail}); create it with createDynamoDBLockTable(client, ${JSON.stringify(tableName)}), which waits until it is ACTIVE`
  } else if (name === 'ValidationException' && /key element does not match the schema|missing the key/i.test(messageOf(error))) {
    advice = `table "${tableName}" does not have the partition key "${partitionKey}" of type S alone (${detail}); pass the table's partition key as { partitionKey }, or create a table with createDynamoDBLockTable`
  } else if (name === 'ValidationException' && /size of hashkey|key.*(size|exceed)/i.test(messageOf(error))) {
    advice = `the lock name is too long for a DynamoDB partition key, which takes at most 2048 bytes of UTF-8 (${detail}); use a shorter lock name`
  } else if ((typeof code === 'string' && UNREACHABLE_CODES.has(code)) || (typeof name === 'string' && UNREACHABLE_NAMES.has(name))) {
    advice = `DynamoDB is unreachable (${detail}); the task was not run. Check the endpoint and the network; the provider recovers by itself once DynamoDB answers again`
  } else if (typeof name === 'string' && THROTTLED.has(name)) {
    advice = `DynamoDB throttled the request after the SDK's retries (${detail}); the task was not run. Raise the table's capacity or use on-demand (PAY_PER_REQUEST) billing`
  } else if (typeof name === 'string' && DENIED.has(name)) {
    advice = `AWS refused the client's credentials or permissions (${detail}); the lock table needs dynamodb:UpdateItem (and DescribeTable and CreateTable for createDynamoDBLockTable)`
  } else {
    advice = detail
  }
  return new LockProviderError(`dynamodb: could not ${what}: ${advice}`, lockName === undefined ? { cause: error, provider: PROVIDER } : { cause: error, provider: PROVIDER, lockName })
}
