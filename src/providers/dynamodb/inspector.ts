import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError } from '../../core/errors.ts'
import type { LockInspector, LockList, LockRecord, LockSelection } from '../../core/lock-inspector.ts'
import { RELEASED_BY } from '../../support/sql/sql-inspector.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  checkName,
  checkPartitionKey,
  checkTableName,
  describeDynamoDBError,
  EXPIRED,
  iso,
  PROVIDER,
  READ_STATE,
  RELEASE,
} from './format.ts'
import {
  checkClient,
  commandLoader,
  type DynamoDBInspectorLib,
  type DynamoDBScanInput,
  type DynamoDBSendClient,
  type DynamoDBStringValue,
  errorName,
} from './sdk.ts'
import { byName } from '../../support/inspection.ts'

/** Options of {@link dynamoDBLockInspector}: the provider's client, table and clock. */
export interface DynamoDBLockInspectorOptions {
  /** Your `DynamoDBClient` (the provider's). */
  client: DynamoDBSendClient
  /** The lock table, a table name or ARN, as the provider's `tableName`. */
  tableName: string
  /** The table's partition key attribute (type S), which holds the lock name. @default "_id" */
  partitionKey?: string
  /** The SDK's command classes. @default `await import('@aws-sdk/client-dynamodb')` on first use */
  lib?: DynamoDBInspectorLib
  /**
   * The clock the providers decide expiry on (DynamoDB compares `lockUntil` with the time each
   * node sends): `now`, `held` and `remainingMs` are read on it, and a force-release writes its
   * time. @default systemClock
   */
  clock?: Clock
}

/** An item as the SDK returns it: attribute name to attribute value. */
type Item = Record<string, Record<string, unknown> | undefined>

/** What an item held when it was read: release(record) matches its acquisition; `undefined` strings were absent. */
interface ReadState {
  readonly lockUntil: string | undefined
  readonly lockedAt: string | undefined
  readonly lockedBy: string | undefined
  /** An attribute of another type than S: not written by shedlock or Java ShedLock, never matched. */
  readonly foreign: boolean
}

/**
 * Reads and force-releases the locks of a DynamoDB lock table, in the provider's (and Java
 * ShedLock's) format: one item per lock, the partition key (`_id`) holding the name and
 * `lockUntil`, `lockedAt` and `lockedBy` as strings (ISO-8601 times). For dashboards, health
 * endpoints and operators. `list()` scans the whole table (consistent reads, page by page; a
 * prefix is a `begins_with` filter, which saves transfer, not read capacity); `get()` is one
 * `GetItem`; `release()` one conditional `UpdateItem`.
 *
 * Expiry is decided on each node's clock (a condition expression cannot read the server's), so
 * `now`, `held` and `remainingMs` are read on `clock`, this host's by default. `held` compares
 * `lockUntil` with now as strings, as the provider's condition does: an item without `lockUntil`
 * is free; one whose `lockUntil` is not a string (written by another program) is held for ever,
 * with an unknown `lockUntil`, and only deleting it frees it.
 *
 * A force-release sets `lockUntil` to now and `lockedBy` to `"released"`, on condition
 * `lockUntil > now` (and, given a record, that `lockedBy` and `lockedAt` are still as read: the
 * same acquisition, however often its holder extended it), and
 * keeps the item, as released locks stay: the lock is free at once, and the holder's release or
 * extension, conditional on its own `lockedBy`, fail and change nothing.
 *
 * `removeExpired()` scans the table for the selection's items whose `lockUntil` (a string) is
 * not after now, then deletes each with one `DeleteItem` conditional on `lockUntil <= now` and
 * the `lockedBy` read: an item another node took meanwhile stays (and does not count).
 *
 * ```ts
 * import { DynamoDBClient } from '@aws-sdk/client-dynamodb'
 * import { dynamoDBLockInspector } from 'shedlock/dynamodb'
 * const inspector = dynamoDBLockInspector({ client: new DynamoDBClient({}), tableName: 'Shedlock' })
 * const { locks } = await inspector.list()
 * await inspector.release('nightly-report')
 * ```
 *
 * @throws LockConfigurationError for a missing client, an invalid table name or partition key,
 *   or a `lib` without the command classes. `get` and `release` reject with it for a name over
 *   2048 bytes, which no lock can have.
 */
export function dynamoDBLockInspector(options: DynamoDBLockInspectorOptions): LockInspector {
  const { client, tableName } = options ?? {}
  checkClient(client)
  checkTableName(tableName)
  const partitionKey = checkPartitionKey(options.partitionKey)
  const commands = commandLoader<DynamoDBInspectorLib>(options.lib, [
    'ScanCommand',
    'GetItemCommand',
    'UpdateItemCommand',
    'DeleteItemCommand',
  ])
  const clock = options.clock ?? systemClock
  if (typeof clock?.now !== 'function')
    throw new LockConfigurationError('dynamodb: clock must have a now() method returning epoch milliseconds')
  const table: Table = { client, tableName, partitionKey, commands }
  const guard = storeGuard(describeDynamoDBError(tableName, partitionKey))
  const readAs = new WeakMap<LockRecord, ReadState>()

  return {
    name: PROVIDER,
    clock: "this host's clock (DynamoDB locks expire on each node's clock)",
    list: (selection): Promise<LockList> =>
      guard('list', '', async () => {
        const items = await scan(table, selection)
        const now = clock.now()
        return {
          now: new Date(now),
          locks: items.map((item) => toRecord(item, partitionKey, now, readAs)).sort(byName),
        }
      }),
    get: async (name) => {
      checkName(name)
      return guard('inspect', name, async () => {
        const { GetItemCommand } = await commands()
        const reply = (await client.send(
          new GetItemCommand({ TableName: tableName, Key: keyOf(partitionKey, name), ConsistentRead: true }),
        )) as { Item?: Item } | undefined
        return reply?.Item && toRecord(reply.Item, partitionKey, clock.now(), readAs)
      })
    },
    release: async (lock) => {
      const name = typeof lock === 'string' ? lock : lock.name
      checkName(name)
      const record = typeof lock === 'string' ? undefined : lock
      const expected = record && readAs.get(record)
      return guard('release', name, async () => {
        // A record read as free, or whose attributes no lock writes, has nothing to release.
        if (record && expected && (!record.held || expected.foreign || expected.lockUntil === undefined)) return false
        return forceRelease(table, name, expected, clock)
      })
    },
    removeExpired: (selection) =>
      guard('list', '', async () => {
        const now = iso(clock.now())
        const expired = await scan(table, selection, {
          expression: EXPIRED.filter,
          values: { ':now': { S: now } },
          projection: '#pk, lockUntil, lockedBy',
        })
        let removed = 0
        for (let i = 0; i < expired.length; i += PARALLEL_DELETES) {
          const results = await Promise.all(
            expired.slice(i, i + PARALLEL_DELETES).map((item) => deleteExpired(table, item, now)),
          )
          removed += results.filter(Boolean).length
        }
        return removed
      }),
  }
}

// Items deleted at once by removeExpired(): enough to hide the round trips, few enough for a table of small capacity.
const PARALLEL_DELETES = 8

/** What the inspector's reads and writes need: the client, the table, its key and the command classes. */
interface Table {
  readonly client: DynamoDBSendClient
  readonly tableName: string
  readonly partitionKey: string
  readonly commands: () => Promise<DynamoDBInspectorLib>
}

/** The record of `item`, with `held` and `remainingMs` at `now`; what it was read with goes to `readAs`. */
function toRecord(item: Item, partitionKey: string, now: number, readAs: WeakMap<LockRecord, ReadState>): LockRecord {
  const until = item.lockUntil
  const lockUntil = stringOf(until)
  const lockedBy = stringOf(item.lockedBy)
  const untilMs = lockUntil === undefined ? Number.NaN : Date.parse(lockUntil)
  const lockedAt = stringOf(item.lockedAt)
  const atMs = Date.parse(lockedAt ?? '')
  const record: LockRecord = Object.freeze({
    name: stringOf(item[partitionKey]) ?? '',
    lockUntil: Number.isNaN(untilMs) ? undefined : new Date(untilMs),
    lockedAt: Number.isNaN(atMs) ? undefined : new Date(atMs),
    lockedBy,
    // As the acquire condition sees it: `attribute_not_exists(lockUntil) OR lockUntil <= :now`.
    held: until === undefined ? false : lockUntil === undefined ? true : lockUntil > iso(now),
    remainingMs: Number.isNaN(untilMs) ? undefined : Math.max(0, untilMs - now),
  })
  readAs.set(record, {
    lockUntil,
    lockedAt,
    lockedBy,
    foreign:
      (until !== undefined && lockUntil === undefined) ||
      (item.lockedBy !== undefined && lockedBy === undefined) ||
      (item.lockedAt !== undefined && lockedAt === undefined),
  })
  return record
}

function keyOf(partitionKey: string, name: string): Record<string, DynamoDBStringValue> {
  return { [partitionKey]: { S: name } }
}

/** Every item of the selection (and of `filter`, an expression over `values`), page by page. */
async function scan(
  table: Table,
  selection: LockSelection | undefined,
  filter?: { expression: string; values: Record<string, DynamoDBStringValue>; projection?: string },
): Promise<Item[]> {
  const { ScanCommand } = await table.commands()
  const prefix = selection?.prefix ?? ''
  const expressions = [...(prefix === '' ? [] : ['begins_with(#pk, :prefix)']), ...(filter ? [filter.expression] : [])]
  const values = { ...(prefix === '' ? {} : { ':prefix': { S: prefix } }), ...filter?.values }
  const usesKey = prefix !== '' || filter?.projection !== undefined
  const input: DynamoDBScanInput = {
    TableName: table.tableName,
    ConsistentRead: true,
    ...(expressions.length > 0
      ? { FilterExpression: expressions.join(' AND '), ExpressionAttributeValues: values }
      : {}),
    ...(filter?.projection ? { ProjectionExpression: filter.projection } : {}),
    ...(usesKey ? { ExpressionAttributeNames: { '#pk': table.partitionKey } } : {}),
  }
  const items: Item[] = []
  let start: Record<string, DynamoDBStringValue> | undefined
  do {
    const page = (await table.client.send(
      new ScanCommand({ ...input, ...(start ? { ExclusiveStartKey: start } : {}) }),
    )) as { Items?: Item[]; LastEvaluatedKey?: Record<string, DynamoDBStringValue> } | undefined
    items.push(...(page?.Items ?? []))
    start = page?.LastEvaluatedKey
  } while (start)
  return items
}

/**
 * Frees lock `name` if it is held: `lockUntil` now on `clock`, `lockedBy` "released". Given
 * `expected`, only in the state it was read in. False when the condition failed.
 */
async function forceRelease(
  table: Table,
  name: string,
  expected: ReadState | undefined,
  clock: Clock,
): Promise<boolean> {
  const { UpdateItemCommand } = await table.commands()
  const values: Record<string, DynamoDBStringValue> = {
    ':now': { S: iso(clock.now()) },
    ':released': { S: RELEASED_BY },
  }
  let condition = RELEASE.condition
  if (expected) {
    // Only the acquisition the record was read from: same holder, taken at the same time.
    const { lockedBy, lockedAt } = expected
    if (lockedBy !== undefined) values[':by'] = { S: lockedBy }
    if (lockedBy !== undefined && lockedAt !== undefined) {
      condition += ` AND ${READ_STATE.held}`
      values[':at'] = { S: lockedAt }
    } else {
      condition += ` AND ${lockedBy === undefined ? READ_STATE.heldByNobody : READ_STATE.heldSinceUnknown}`
      values[':until'] = { S: expected.lockUntil! }
    }
  }
  return conditionally(() =>
    table.client.send(
      new UpdateItemCommand({
        TableName: table.tableName,
        Key: keyOf(table.partitionKey, name),
        UpdateExpression: RELEASE.update,
        ConditionExpression: condition,
        ExpressionAttributeValues: values,
      }),
    ),
  )
}

/** Deletes `item` if it is still expired at `now` and held by the `lockedBy` read; false when not. */
async function deleteExpired(table: Table, item: Item, now: string): Promise<boolean> {
  const name = stringOf(item[table.partitionKey])
  const lockedBy = stringOf(item.lockedBy)
  // A key or holder of another type than S: no lock of shedlock or Java ShedLock, left alone.
  if (name === undefined || (item.lockedBy !== undefined && lockedBy === undefined)) return false
  const { DeleteItemCommand } = await table.commands()
  const values: Record<string, DynamoDBStringValue> = { ':now': { S: now } }
  if (lockedBy !== undefined) values[':by'] = { S: lockedBy }
  return conditionally(() =>
    table.client.send(
      new DeleteItemCommand({
        TableName: table.tableName,
        Key: keyOf(table.partitionKey, name),
        ConditionExpression: lockedBy === undefined ? EXPIRED.noLockedBy : EXPIRED.lockedBy,
        ExpressionAttributeValues: values,
      }),
    ),
  )
}

/** Whether a conditional write took place: false when its condition failed; other errors reject. */
async function conditionally(write: () => Promise<unknown>): Promise<boolean> {
  try {
    await write()
    return true
  } catch (error) {
    if (errorName(error) === 'ConditionalCheckFailedException') return false
    throw error
  }
}

/** The string of an S attribute value, or `undefined` for a missing attribute or another type. */
function stringOf(value: Record<string, unknown> | undefined): string | undefined {
  return typeof value?.S === 'string' ? value.S : undefined
}
