import { setTimeout as sleep } from 'node:timers/promises'
import { type Clock, systemClock } from '../../core/clock.ts'
import { LockConfigurationError, LockProviderError } from '../../core/errors.ts'
import type { LockConfiguration } from '../../core/lock-configuration.ts'
import type { ExtensibleLockProvider, InspectableLockProvider } from '../../core/lock-provider.ts'
import { defineLock } from '../../core/define-lock.ts'
import { FencingFloor, parseFencingToken } from '../../support/fencing.ts'
import { lockOwner } from '../../support/lock-owner.ts'
import { checkLockRequest } from '../../support/lock-request.ts'
import { storeGuard } from '../../support/store-errors.ts'
import {
  ACQUIRE,
  checkName,
  checkPartitionKey,
  checkTableName,
  describeDynamoDBError,
  dynamoDBError,
  EXTEND,
  FENCING_TOKEN,
  iso,
  keySchemaProblem,
  lockTableDefinition,
  PROVIDER,
  type Statement,
  type TableDescription,
  UNLOCK,
} from './format.ts'
import { dynamoDBLockInspector } from './inspector.ts'
import {
  checkClient,
  commandLoader,
  type DynamoDBInspectorLib,
  type DynamoDBLib,
  type DynamoDBSendClient,
  type DynamoDBUpdateItemInput,
  errorName,
} from './sdk.ts'

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

// How long createDynamoDBLockTable waits for a new table to become ACTIVE.
const TABLE_WAIT_MS = 5 * 60_000

/**
 * Locks as items of a DynamoDB table in Java ShedLock's format, through your `DynamoDBClient`.
 * Extensible (Java ShedLock's DynamoDB provider is not); expiry is decided on each node's `clock`,
 * so keep node clocks in sync; every lock carries a `fencingToken` at no extra request.
 * `@aws-sdk/client-dynamodb` is imported on the first lock attempt unless you pass `lib`.
 *
 * ```ts
 * import { DynamoDBClient } from '@aws-sdk/client-dynamodb'
 * import { createDynamoDBLockTable, dynamoDBLockProvider } from 'shedlock/dynamodb'
 * const client = new DynamoDBClient({})
 * await createDynamoDBLockTable(client, 'Shedlock')
 * const provider = dynamoDBLockProvider({ client, tableName: 'Shedlock' })
 * ```
 *
 * Give the client request timeouts that throw (`throwOnRequestTimeout: true`), or a lock attempt
 * waits as long as the network does. See docs/providers/dynamodb.md.
 *
 * @throws LockConfigurationError for a missing client, an invalid table name, a `partitionKey`
 *   that is empty or one of the lock attributes, an empty `lockedBy`, or a `lib` without the
 *   command classes.
 */
export function dynamoDBLockProvider(
  options: DynamoDBLockProviderOptions,
): ExtensibleLockProvider & InspectableLockProvider {
  const { client, tableName, lockedBy } = options ?? {}
  checkClient(client)
  checkTableName(tableName)
  const partitionKey = checkPartitionKey(options.partitionKey)
  if (lockedBy !== undefined && (typeof lockedBy !== 'string' || lockedBy.trim() === '')) {
    throw new LockConfigurationError(
      `dynamodb: lockedBy must be a non-empty string (it prefixes the lockedBy attribute), got ${JSON.stringify(lockedBy)}`,
    )
  }
  const commands = commandLoader<DynamoDBLib>(options.lib, ['UpdateItemCommand'])
  const clock = options.clock ?? systemClock
  const floor = new FencingFloor(clock)

  /**
   * Runs one conditional update; resolves to `false` when its condition failed, else to the
   * attributes it returned (`{}` unless `numbers` asked for the fencing counter back).
   */
  const update = async (
    name: string,
    statement: Statement,
    values: Record<string, string>,
    numbers?: Record<string, string>,
  ): Promise<false | Record<string, { N?: string }>> => {
    const { UpdateItemCommand } = await commands()
    const ExpressionAttributeValues: DynamoDBUpdateItemInput['ExpressionAttributeValues'] = {}
    for (const [key, S] of Object.entries(values)) ExpressionAttributeValues[key] = { S }
    if (numbers) for (const [key, N] of Object.entries(numbers)) ExpressionAttributeValues[key] = { N }
    const input: DynamoDBUpdateItemInput = {
      TableName: tableName,
      Key: { [partitionKey]: { S: name } },
      UpdateExpression: statement.update,
      ConditionExpression: statement.condition,
      ExpressionAttributeValues,
    }
    if (numbers) input.ReturnValues = 'UPDATED_NEW'
    try {
      const reply = (await client.send(new UpdateItemCommand(input))) as
        | { Attributes?: Record<string, { N?: string }> }
        | undefined
      return reply?.Attributes ?? {}
    } catch (error) {
      if (errorName(error) === 'ConditionalCheckFailedException') return false
      throw error
    }
  }

  const guard = storeGuard(describeDynamoDBError(tableName, partitionKey))

  return {
    name: PROVIDER,
    // A `lib` given is the SDK module, which has the inspector's commands too.
    inspector: () =>
      dynamoDBLockInspector({
        client,
        tableName,
        partitionKey,
        clock,
        ...(options.lib ? { lib: options.lib as DynamoDBLib & DynamoDBInspectorLib } : {}),
      }),
    async lock(configuration: LockConfiguration) {
      checkLockRequest(PROVIDER, configuration, clock)
      checkName(configuration.name)
      const owner = lockOwner(lockedBy)
      const acquired = await guard('acquire', configuration.name, () =>
        update(
          configuration.name,
          ACQUIRE,
          { ':lockUntil': iso(configuration.lockAtMostUntil.getTime()), ':now': iso(clock.now()), ':owner': owner },
          { ':floor': String(floor.at()), ':one': '1' },
        ),
      )
      if (!acquired) return undefined
      // Absent only from a client that does not return the attributes asked for (not DynamoDB's).
      const fencingToken = floor.saw(parseFencingToken(acquired[FENCING_TOKEN]?.N))
      return defineLock(configuration, {
        clock,
        lockedBy: owner,
        ...(fencingToken === undefined ? {} : { fencingToken }),
        unlock: async (current) => {
          // A failed condition means another node holds the lock by now (or the item is gone): leave it.
          const lockUntil = iso(Math.max(clock.now(), current.lockAtLeastUntil.getTime()))
          await guard('release', current.name, () =>
            update(current.name, UNLOCK, { ':lockUntil': lockUntil, ':owner': owner }),
          )
        },
        extend: (next) =>
          guard(
            'extend',
            next.name,
            async () =>
              (await update(next.name, EXTEND, {
                ':lockUntil': iso(next.lockAtMostUntil.getTime()),
                ':now': iso(clock.now()),
                ':owner': owner,
              })) !== false,
          ),
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
export async function createDynamoDBLockTable(
  client: DynamoDBSendClient,
  tableName: string,
  options: CreateDynamoDBLockTableOptions = {},
): Promise<void> {
  checkClient(client)
  checkTableName(tableName)
  const partitionKey = checkPartitionKey(options.partitionKey)
  const what = `create lock table "${tableName}"`
  const load = commandLoader<DynamoDBLib>(options.lib, ['DescribeTableCommand', 'CreateTableCommand'])
  const { DescribeTableCommand, CreateTableCommand } = await load().catch((error: unknown) => {
    throw dynamoDBError(error, what, 'the table was not created', undefined, tableName, partitionKey)
  })
  const fail = (advice: string, cause?: unknown): LockProviderError =>
    new LockProviderError(
      `dynamodb: could not ${what}: ${advice}`,
      cause === undefined ? { provider: PROVIDER } : { cause, provider: PROVIDER },
    )

  const describe = async (): Promise<TableDescription | undefined> => {
    try {
      const reply = (await client.send(new DescribeTableCommand({ TableName: tableName }))) as
        | { Table?: TableDescription }
        | undefined
      return reply?.Table ?? {}
    } catch (error) {
      if (errorName(error) === 'ResourceNotFoundException') return undefined
      throw dynamoDBError(error, what, 'the table was not created', undefined, tableName, partitionKey)
    }
  }

  const deadline = Date.now() + TABLE_WAIT_MS
  let pause = 100
  let checked = false
  for (;;) {
    const table = await describe()
    if (!table) {
      try {
        await client.send(new CreateTableCommand(lockTableDefinition(tableName, partitionKey)))
      } catch (error) {
        // Another node created it a moment ago: wait for it like for ours.
        if (errorName(error) !== 'ResourceInUseException')
          throw dynamoDBError(error, what, 'the table was not created', undefined, tableName, partitionKey)
      }
    } else {
      if (!checked && table.KeySchema) {
        const problem = keySchemaProblem(table, partitionKey)
        if (problem) throw fail(`${problem}. Pass the table's partition key as { partitionKey }, or use another table`)
        checked = true
      }
      if (table.TableStatus === 'ACTIVE') return
    }
    if (Date.now() + pause > deadline) {
      throw fail(
        `the table is not ACTIVE after ${TABLE_WAIT_MS / 60_000} minutes (status ${table?.TableStatus ?? 'missing'}); check it in the AWS console and call createDynamoDBLockTable again`,
      )
    }
    await sleep(pause)
    pause = Math.min(2_000, pause * 2)
  }
}
