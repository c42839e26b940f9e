import { createDynamoDBLockTable, type DynamoDBLib, dynamoDBLockProvider } from '../../providers/dynamodb.ts'
import { CliError, messageOf, UsageError } from '../command.ts'
import { importDriver } from '../import-driver.ts'
import type { Check, ClockReading, LockRecord, Store, StoreOptions } from '../store.ts'
import { ownParameters, type StoreUrl } from '../store-url.ts'

type Attributes = Record<string, { S?: string } | undefined>
type CommandClass = new (input: object) => object
interface Client {
  send(command: object): Promise<unknown>
  destroy(): void
  middlewareStack: { add(middleware: (next: (args: object) => Promise<{ response?: unknown }>) => (args: object) => Promise<{ response?: unknown }>, options: { step: 'deserialize'; name: string }): void }
}
interface SdkModule extends DynamoDBLib {
  DynamoDBClient: new (config: { region?: string; endpoint?: string; maxAttempts: number; requestHandler: { connectionTimeout: number; requestTimeout: number } }) => Client
  ScanCommand: CommandClass
  GetItemCommand: CommandClass
  DeleteItemCommand: CommandClass
}
interface TableDescription {
  TableStatus?: string
  KeySchema?: { AttributeName?: string; KeyType?: string }[]
  AttributeDefinitions?: { AttributeName?: string; AttributeType?: string }[]
}

const SDK = '@aws-sdk/client-dynamodb'
const KEY = '_id'
const TIMEOUT_MS = 10_000

/**
 * Opens a `dynamodb://[HOST:PORT][?region=R&table=T]` URL with the AWS SDK v3. With HOST:PORT the
 * client talks plain HTTP to that endpoint (DynamoDB Local, dynalite); without, to AWS in the
 * region (`?region=`, else the SDK's usual sources). Credentials come from the SDK's usual
 * sources (AWS_ACCESS_KEY_ID..., profiles, roles), never from the URL. The table (`--table` or
 * `?table=`, default `Shedlock`) has the provider's layout: partition key `_id`, string
 * attributes `lockUntil`, `lockedAt`, `lockedBy`.
 */
export async function openDynamoDBStore(url: StoreUrl, options: StoreOptions): Promise<Store> {
  const parsed = url.url!
  if (parsed.username !== '' || parsed.password !== '') {
    throw new UsageError('dynamodb URLs take no credentials: the AWS SDK reads them from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or a role')
  }
  if (parsed.pathname !== '' && parsed.pathname !== '/') throw new UsageError(`dynamodb URLs take no path, got ${url.redacted}`)
  const parameters = ownParameters(url, ['region', 'table'])
  const inUrl = parameters.get('table')
  if (inUrl !== undefined && options.table !== undefined && inUrl !== options.table) {
    throw new UsageError(`the URL names table ${JSON.stringify(inUrl)} and --table ${JSON.stringify(options.table)}; give one`)
  }
  const tableName = options.table ?? inUrl ?? 'Shedlock'
  const endpoint = parsed.hostname === '' ? undefined : `http://${parsed.host}`
  // A local endpoint ignores the region, but the SDK refuses to start without one.
  const region = parameters.get('region') ?? (endpoint && !process.env.AWS_REGION && !process.env.AWS_DEFAULT_REGION ? 'us-east-1' : undefined)
  const sdk = await importDriver<SdkModule>(SDK, SDK, 'dynamodb://')
  const client = new sdk.DynamoDBClient({
    ...(region ? { region } : {}),
    ...(endpoint ? { endpoint } : {}),
    maxAttempts: 2,
    requestHandler: { connectionTimeout: TIMEOUT_MS, requestTimeout: TIMEOUT_MS },
  })
  // DynamoDB has no clock to query, but every reply carries the server's time in its Date header.
  let replyDate: string | undefined
  client.middlewareStack.add(
    (next) => async (args) => {
      const result = await next(args)
      replyDate = (result.response as { headers?: Record<string, string> } | undefined)?.headers?.date ?? replyDate
      return result
    },
    { step: 'deserialize', name: 'shedlockReplyDate' },
  )
  const send = <T>(command: object): Promise<T> => client.send(command) as Promise<T>
  const describe = async (): Promise<TableDescription | undefined> => {
    try {
      return (await send<{ Table?: TableDescription }>(new sdk.DescribeTableCommand({ TableName: tableName }))).Table ?? {}
    } catch (error) {
      if (nameOf(error) === 'ResourceNotFoundException') return undefined
      throw error
    }
  }
  try {
    await describe()
  } catch (error) {
    client.destroy()
    const credentials = nameOf(error) === 'CredentialsProviderError' ? ' (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; any values do for a local endpoint)' : ''
    throw new CliError(`cannot reach DynamoDB at ${url.redacted}: ${messageOf(error)}${credentials}; check the URL, the region and the credentials`, { cause: error })
  }
  const provider = dynamoDBLockProvider({ client, tableName, lib: sdk })
  const missing = `table ${tableName} does not exist; create it with: shedlock init --url ${url.redacted}${options.table === undefined ? '' : ` --table ${tableName}`}`
  const guarded = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run()
    } catch (error) {
      if (nameOf(error) === 'ResourceNotFoundException') throw new CliError(missing, { cause: error })
      throw error
    }
  }
  const toRecord = (item: Attributes): LockRecord => {
    const lockUntil = item.lockUntil?.S
    const lockedAt = item.lockedAt?.S
    return {
      name: item[KEY]?.S ?? '',
      lockUntil: lockUntil === undefined ? undefined : Date.parse(lockUntil),
      lockedAt: lockedAt === undefined ? undefined : Date.parse(lockedAt),
      lockedBy: item.lockedBy?.S,
      token: { lockedBy: item.lockedBy?.S, lockUntil },
    }
  }
  const clock = "this host's clock (DynamoDB locks expire on the app clock)"

  return {
    kind: 'DynamoDB',
    where: `${url.redacted} (table ${tableName})`,
    extensible: true,
    provider: () => provider,
    list: () =>
      guarded(async () => {
        const now = Date.now()
        const records: LockRecord[] = []
        let start: Attributes | undefined
        do {
          const page = await send<{ Items?: Attributes[]; LastEvaluatedKey?: Attributes }>(
            new sdk.ScanCommand({ TableName: tableName, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }),
          )
          for (const item of page.Items ?? []) records.push(toRecord(item))
          start = page.LastEvaluatedKey
        } while (start)
        return { now, clock, value: records.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) }
      }),
    find: (name) =>
      guarded(async () => {
        const now = Date.now()
        const { Item } = await send<{ Item?: Attributes }>(new sdk.GetItemCommand({ TableName: tableName, Key: { [KEY]: { S: name } }, ConsistentRead: true }))
        return { now, clock, value: Item && toRecord(Item) }
      }),
    async release(record) {
      const token = record.token as { lockedBy?: string; lockUntil?: string }
      if (token.lockedBy === undefined || token.lockUntil === undefined) return false
      const now = new Date().toISOString()
      try {
        // The item stays, as the provider leaves a released lock; only the state that was shown moves.
        await send(
          new sdk.UpdateItemCommand({
            TableName: tableName,
            Key: { [KEY]: { S: record.name } },
            UpdateExpression: 'SET lockUntil = :now',
            ConditionExpression: 'lockedBy = :by AND lockUntil = :until AND lockUntil > :now',
            ExpressionAttributeValues: { ':now': { S: now }, ':by': { S: token.lockedBy }, ':until': { S: token.lockUntil } },
          }),
        )
        return true
      } catch (error) {
        if (nameOf(error) === 'ConditionalCheckFailedException') return false
        throw error
      }
    },
    async init() {
      if (await describe()) return [`table ${tableName} already exists: nothing to do (shedlock doctor checks its key)`]
      await createDynamoDBLockTable(client, tableName, { lib: sdk })
      return [`created table ${tableName} (partition key ${KEY}, on-demand capacity) and waited until it was ACTIVE`]
    },
    ping: async () => {
      await describe()
      return `DynamoDB${endpoint ? ` at ${endpoint}` : ''}`
    },
    async structure(): Promise<Check[]> {
      const table = await describe()
      const label = `table ${tableName}`
      if (!table) return [{ status: 'fail', label, detail: missing.replace(`${label} `, '') }]
      const keys = table.KeySchema ?? []
      const hash = keys.find((key) => key.KeyType === 'HASH')
      const type = table.AttributeDefinitions?.find((definition) => definition.AttributeName === hash?.AttributeName)?.AttributeType
      if (keys.length !== 1 || hash?.AttributeName !== KEY || type !== 'S') {
        const actual = keys.map((key) => `${key.KeyType} ${key.AttributeName}`).join(', ') || 'none'
        return [{ status: 'fail', label, detail: `has the key ${actual}, but shedlock needs the partition key ${KEY} of type S alone; use another table` }]
      }
      if (table.TableStatus !== 'ACTIVE') return [{ status: 'fail', label, detail: `is ${table.TableStatus ?? 'in an unknown state'}, not ACTIVE; wait and run doctor again` }]
      return [{ status: 'ok', label, detail: `ACTIVE, partition key ${KEY} (S)` }]
    },
    async remove(name) {
      await send(new sdk.DeleteItemCommand({ TableName: tableName, Key: { [KEY]: { S: name } } }))
    },
    async readClock(): Promise<ClockReading | string> {
      replyDate = undefined
      const before = Date.now()
      await describe()
      const after = Date.now()
      const storeMs = replyDate === undefined ? Number.NaN : Date.parse(replyDate)
      if (Number.isNaN(storeMs)) return 'not measured: the reply had no Date header'
      return { storeMs, before, after, resolutionMs: 1000, source: 'the Date header of a reply (whole seconds)' }
    },
    clockDependence: 'the DynamoDB provider decides expiry on the app clock, so every host running locks needs this in sync',
    close: async () => client.destroy(),
  }
}

function nameOf(error: unknown): unknown {
  return (error as { name?: unknown } | null)?.name
}
