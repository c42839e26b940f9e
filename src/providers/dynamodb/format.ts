import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import { nameTooLong, utf8LengthOver } from '../../support/lock-request.ts'
import { type DescribeStoreError, messageOf, outcomeOf, SOCKET_FAILURE_CODES } from '../../support/store-errors.ts'
import { type DynamoDBCreateTableInput, SdkLoadError } from './sdk.ts'

// Java ShedLock's lock table in DynamoDB: the key and attributes of an item, the conditional
// updates that take, move and release a lock, the table's definition, and what the SDK's errors
// mean. The provider, the inspector and the CLI read it from here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 'dynamodb'

/** The partition key attribute unless `partitionKey` says otherwise: Java ShedLock's. */
export const DEFAULT_PARTITION_KEY = '_id'
/** The table name of Java ShedLock's README, the CLI's default. */
export const DEFAULT_TABLE = 'Shedlock'

// DynamoDB's limit for a partition key value, in bytes of UTF-8 (dynalite checks it in characters).
const MAX_KEY_BYTES = 2048
/**
 * The item's fencing counter, a number: shedlock's own attribute, which Java ShedLock neither
 * reads nor writes (its updates SET the three lock attributes by name, so the counter survives them).
 */
export const FENCING_TOKEN = 'fencingToken'
const LOCK_ATTRIBUTES = ['lockUntil', 'lockedAt', 'lockedBy', FENCING_TOKEN]
// Table names are 3-255 of [A-Za-z0-9_.-]; newer DynamoDB APIs also take the table's ARN.
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/
const TABLE_ARN = /^arn:[a-z-]+:dynamodb:[a-z0-9-]*:\d*:table\/[A-Za-z0-9_.-]{3,255}$/

/** One conditional `UpdateItem`: its update and condition expressions. */
export interface Statement {
  readonly update: string
  readonly condition: string
}

// Attribute names are plain (none is a DynamoDB reserved word); the values are ISO-8601 UTC
// strings with exactly three fraction digits, so `<=` and `>` on strings compare times, the way
// Java ShedLock compares them.

/**
 * Insert, or take over an expired lock (Java ShedLock's condition, in another order), and count
 * the acquisition in `fencingToken`: one more than before, or, on an item without one (new,
 * recreated after a delete, or written by Java only), one more than `:floor` (support/fencing.ts).
 * The write returns the count (`ReturnValues: UPDATED_NEW`): the token costs no request.
 */
export const ACQUIRE: Statement = {
  update: `SET lockUntil = :lockUntil, lockedAt = :now, lockedBy = :owner, ${FENCING_TOKEN} = if_not_exists(${FENCING_TOKEN}, :floor) + :one`,
  condition: 'attribute_not_exists(lockUntil) OR lockUntil <= :now',
}
/**
 * Only the acquisition that holds the lock may move it; on a missing item the condition fails, so
 * an unlock never recreates a deleted item.
 */
export const UNLOCK: Statement = { update: 'SET lockUntil = :lockUntil', condition: 'lockedBy = :owner' }
/** Only a holder whose lock has not expired: after expiry another node may take it at any moment. */
export const EXTEND: Statement = {
  update: 'SET lockUntil = :lockUntil',
  condition: 'lockedBy = :owner AND lockUntil > :now',
}
/**
 * A force-release: lockUntil now and another owner than the holder's, so that its owner-checked
 * unlock and extend fail; only a held lock (on a missing item the condition fails too, so nothing
 * is created). `READ_STATE` narrows it to the state a record was read in.
 */
export const RELEASE: Statement = {
  update: 'SET lockUntil = :now, lockedBy = :released',
  condition: 'lockUntil > :now',
}
/**
 * Added to {@link RELEASE}'s condition for a record: the acquisition read, its holder and the time
 * it was taken (an extension moves only `lockUntil`). An item without `lockedAt` (not written by
 * shedlock or Java ShedLock) has only its expiry to tell, and one without a holder too.
 */
export const READ_STATE = {
  held: 'lockedBy = :by AND lockedAt = :at',
  heldSinceUnknown: 'lockedBy = :by AND attribute_not_exists(lockedAt) AND lockUntil = :until',
  heldByNobody: 'lockUntil = :until AND attribute_not_exists(lockedBy)',
} as const
/**
 * `removeExpired()`: the Scan filter of expired items (a `lockUntil` of type S not after now; an
 * item without one, or with another type, is left alone), and the condition of each `DeleteItem`:
 * still expired, and still the holder read (or none), so that an item taken meanwhile stays.
 */
export const EXPIRED = {
  filter: 'lockUntil <= :now',
  lockedBy: 'lockUntil <= :now AND lockedBy = :by',
  noLockedBy: 'lockUntil <= :now AND attribute_not_exists(lockedBy)',
} as const

/** ISO-8601 UTC with exactly three fraction digits, Java ShedLock's `Utils.toIsoString`. */
export function iso(ms: number): string {
  return new Date(ms).toISOString()
}

/**
 * Checks `name` before anything is sent.
 * @throws LockConfigurationError for a name over 2048 bytes of UTF-8, the most a partition key holds.
 */
export function checkName(name: string): void {
  const bytes = utf8LengthOver(name, MAX_KEY_BYTES)
  if (bytes !== undefined)
    throw nameTooLong(PROVIDER, name, bytes, MAX_KEY_BYTES, 'bytes', 'the name, a partition key,')
}

/** @throws LockConfigurationError for a table name that is neither a DynamoDB table name nor a table ARN. */
export function checkTableName(tableName: unknown): asserts tableName is string {
  if (typeof tableName !== 'string' || !(TABLE_NAME.test(tableName) || TABLE_ARN.test(tableName))) {
    throw new LockConfigurationError(
      `dynamodb: tableName ${JSON.stringify(tableName)} is not a DynamoDB table name; use 3 to 255 letters, digits, '_', '-' or '.' (e.g. "Shedlock"), or the table's ARN`,
    )
  }
}

/**
 * The partition key attribute, `_id` unless given.
 * @throws LockConfigurationError for an empty or overlong name, or one of the lock attributes.
 */
export function checkPartitionKey(partitionKey: unknown = DEFAULT_PARTITION_KEY): string {
  if (typeof partitionKey !== 'string' || partitionKey === '' || Buffer.byteLength(partitionKey) > 255) {
    throw new LockConfigurationError(
      `dynamodb: partitionKey must be an attribute name of 1 to 255 bytes, got ${JSON.stringify(partitionKey)}`,
    )
  }
  if (LOCK_ATTRIBUTES.includes(partitionKey)) {
    throw new LockConfigurationError(
      `dynamodb: partitionKey cannot be "${partitionKey}": the lock item uses that attribute; keep the default "_id" or pick another name`,
    )
  }
  return partitionKey
}

/**
 * The lock table, as `CreateTableCommand` takes it: partition key `partitionKey` of type S, no
 * sort key, on-demand capacity, the layout Java ShedLock's `DynamoDBUtils.createLockTable` creates.
 */
export function lockTableDefinition(
  tableName: string,
  partitionKey: string = DEFAULT_PARTITION_KEY,
): DynamoDBCreateTableInput {
  return {
    TableName: tableName,
    KeySchema: [{ AttributeName: partitionKey, KeyType: 'HASH' }],
    AttributeDefinitions: [{ AttributeName: partitionKey, AttributeType: 'S' }],
    BillingMode: 'PAY_PER_REQUEST',
  }
}

/** What `DescribeTable` says about a table, as far as shedlock reads it. */
export interface TableDescription {
  TableStatus?: string
  KeySchema?: { AttributeName?: string; KeyType?: string }[]
  AttributeDefinitions?: { AttributeName?: string; AttributeType?: string }[]
}

/** Why `table` cannot hold locks (another key schema), or `undefined` when it has {@link lockTableDefinition}'s key. */
export function keySchemaProblem(table: TableDescription, partitionKey: string): string | undefined {
  const keys = table.KeySchema ?? []
  const hash = keys.find((key) => key.KeyType === 'HASH')
  const type = table.AttributeDefinitions?.find(
    (definition) => definition.AttributeName === hash?.AttributeName,
  )?.AttributeType
  if (keys.length === 1 && hash?.AttributeName === partitionKey && type === 'S') return undefined
  const actual = keys.map((key) => `${key.KeyType} "${key.AttributeName}"`).join(', ')
  return `the table exists with key schema ${actual || 'unknown'}${type ? ` (partition key type ${type})` : ''}, but ShedLock needs the partition key "${partitionKey}" of type S and no sort key`
}

/** What `shedlock schema dynamodb` prints: the AWS CLI command that creates {@link lockTableDefinition}. */
export function dynamoDBSchema(tableName: string = DEFAULT_TABLE): string {
  const { KeySchema, AttributeDefinitions, BillingMode } = lockTableDefinition(tableName)
  const key = KeySchema[0]!
  const attribute = AttributeDefinitions[0]!
  return [
    `# One item per lock: ${key.AttributeName} (the lock name, partition key), lockUntil, lockedAt, lockedBy (ISO-8601 strings).`,
    `aws dynamodb create-table --table-name ${shellWord(tableName)} \\`,
    `  --attribute-definitions AttributeName=${attribute.AttributeName},AttributeType=${attribute.AttributeType} \\`,
    `  --key-schema AttributeName=${key.AttributeName},KeyType=${key.KeyType} \\`,
    `  --billing-mode ${BillingMode}`,
  ].join('\n')
}

/** `word` quoted for a POSIX shell when it needs quoting. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_.-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}

// Socket-level failures the SDK passes on after its retries.
const UNREACHABLE_CODES: ReadonlySet<string> = new Set([...SOCKET_FAILURE_CODES, 'EPROTO'])
const UNREACHABLE_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'NetworkingError',
  'ServiceUnavailable',
  'InternalServerError',
])
const THROTTLED = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded'])
const DENIED = new Set([
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'AccessDeniedException',
  'ExpiredTokenException',
  'CredentialsProviderError',
  'MissingAuthenticationTokenException',
])

/**
 * Turns an SDK error into a `LockProviderError` that says what failed (`what`, e.g. `acquire lock
 * "x"`), what that means (`outcome`), names the lock when there is one, and says what to do.
 */
export function dynamoDBError(
  error: unknown,
  what: string,
  outcome: string,
  lockName: string | undefined,
  tableName: string,
  partitionKey: string,
): LockProviderError {
  if (error instanceof LockProviderError) return error
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown }
  const detail = `${typeof name === 'string' && name !== 'Error' ? `${name}: ` : ''}${messageOf(error)}`
  let advice: string
  if (error instanceof SdkLoadError) {
    return new LockProviderError(
      `dynamodb: could not ${what}: ${error.message}`,
      lockName === undefined
        ? { cause: error.cause, provider: PROVIDER }
        : { cause: error.cause, provider: PROVIDER, lockName },
    )
  } else if (name === 'ResourceNotFoundException') {
    advice = `table "${tableName}" does not exist in the client's account and region, or is not ACTIVE yet (${detail}); create it with createDynamoDBLockTable(client, ${JSON.stringify(tableName)}), which waits until it is ACTIVE`
  } else if (
    name === 'ValidationException' &&
    /key element does not match the schema|missing the key/i.test(messageOf(error))
  ) {
    advice = `table "${tableName}" does not have the partition key "${partitionKey}" of type S alone (${detail}); pass the table's partition key as { partitionKey }, or create a table with createDynamoDBLockTable`
  } else if (name === 'ValidationException' && /size of hashkey|key.*(size|exceed)/i.test(messageOf(error))) {
    advice = `the lock name is too long for a DynamoDB partition key, which takes at most 2048 bytes of UTF-8 (${detail}); use a shorter lock name`
  } else if (
    (typeof code === 'string' && UNREACHABLE_CODES.has(code)) ||
    (typeof name === 'string' && UNREACHABLE_NAMES.has(name))
  ) {
    advice = `DynamoDB is unreachable (${detail}); ${outcome}. Check the endpoint and the network; the provider recovers by itself once DynamoDB answers again`
  } else if (typeof name === 'string' && THROTTLED.has(name)) {
    advice = `DynamoDB throttled the request after the SDK's retries (${detail}); ${outcome}. Raise the table's capacity or use on-demand (PAY_PER_REQUEST) billing`
  } else if (typeof name === 'string' && DENIED.has(name)) {
    advice = `AWS refused the client's credentials or permissions (${detail}); the lock table needs dynamodb:UpdateItem (the inspector also Scan and GetItem; createDynamoDBLockTable DescribeTable and CreateTable)`
  } else {
    advice = detail
  }
  return new LockProviderError(
    `dynamodb: could not ${what}: ${advice}`,
    lockName === undefined ? { cause: error, provider: PROVIDER } : { cause: error, provider: PROVIDER, lockName },
  )
}

/** {@link dynamoDBError} for a provider's or inspector's action on a lock, or the listing. */
export function describeDynamoDBError(tableName: string, partitionKey: string): DescribeStoreError {
  return (error, action, lockName) =>
    action === 'list'
      ? dynamoDBError(error, 'list the locks', outcomeOf(action), undefined, tableName, partitionKey)
      : dynamoDBError(error, `${action} lock "${lockName}"`, outcomeOf(action), lockName, tableName, partitionKey)
}
