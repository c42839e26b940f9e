import { parseArgs } from 'node:util'
import { STORES, storeNamed } from '../providers/registry.ts'
import { type Command, EXIT_OK, UsageError } from './command.ts'
import { parseStoreUrl } from './store-url.ts'

const HELP = `Usage: shedlock schema STORE [--table NAME]

Prints what the store's provider needs, to put in your migrations:
  postgres, mysql (or mariadb), sqlite   the CREATE TABLE statement
  mongodb                                a mongosh command creating it
  dynamodb                               an AWS CLI command creating the table
  nats                                   a nats CLI command creating the bucket
  s3                                     an AWS CLI command creating the bucket
  redis, etcd, zookeeper, memcached      the key format (nothing to create)
STORE may also be a store URL; without STORE, the scheme of $SHEDLOCK_URL.
"shedlock init --url URL" creates the same directly.

Options:
  --table NAME   table, collection or DynamoDB table name
                 (default: shedlock; MongoDB: shedLock; DynamoDB: Shedlock)
  -h, --help     show this help

Exit codes: 0 printed, 2 usage error
`

/** `shedlock schema`. */
export const schemaCommand: Command = {
  name: 'schema',
  summary: 'print the CREATE TABLE (or what a store needs) for migrations',
  help: HELP,
  async run(args) {
    let parsed
    try {
      parsed = parseArgs({ args, options: { table: { type: 'string' } }, strict: true, allowPositionals: true })
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message.split('\n')[0]!.replace(/\.$/, '') : String(error))
    }
    const { values, positionals } = parsed
    if (positionals.length > 1) throw new UsageError(`one STORE at a time, got ${positionals.map((p) => JSON.stringify(p)).join(', ')}`)
    const given = positionals[0] ?? process.env.SHEDLOCK_URL
    if (given === undefined || given === '') throw new UsageError('name the store: shedlock schema postgres (or mysql, sqlite, mongodb, dynamodb, nats, ...)')
    const store = storeNamed(given) ?? (given.includes(':') ? parseStoreUrl(given).store : undefined)
    if (!store) throw new UsageError(`unknown store ${JSON.stringify(given)}: use ${STORES.flatMap((s) => [s.id, ...(s.aliases ?? [])]).join(', ')}`)
    if (values.table !== undefined && !store.table)
      throw new UsageError(`--table does not apply to ${store.id}: ${store.insteadOfTable ?? 'it keeps no table'}`)
    process.stdout.write(`${(await store.load()).schema(values.table)}\n`)
    return EXIT_OK
  },
}
