import { parseArgs } from 'node:util'
import { mysqlSchema } from '../providers/mysql.ts'
import { NATS_LOCK_BUCKET } from '../providers/nats.ts'
import { postgresSchema } from '../providers/postgres.ts'
import { sqliteSchema } from '../providers/sqlite.ts'
import { type Command, EXIT_OK, UsageError } from './command.ts'
import { parseStoreUrl, type StoreScheme } from './store-url.ts'

const HELP = `Usage: shedlock schema STORE [--table NAME]

Prints what the store's provider needs, to put in your migrations:
  postgres, mysql (or mariadb), sqlite   the CREATE TABLE statement
  mongodb                                a mongosh command creating the collection
  dynamodb                               an AWS CLI command creating the table
  nats                                   a nats CLI command creating the bucket
  redis, etcd, zookeeper, memcached      the key format (nothing to create)
STORE may also be a store URL; without STORE, the scheme of $SHEDLOCK_URL.
"shedlock init --url URL" creates the same directly.

Options:
  --table NAME   table, collection or DynamoDB table name
                 (default: shedlock; MongoDB: shedLock; DynamoDB: Shedlock)
  -h, --help     show this help

Exit codes: 0 printed, 2 usage error
`

const NAMES: Readonly<Record<string, StoreScheme>> = {
  postgres: 'postgres',
  postgresql: 'postgres',
  mysql: 'mysql',
  mariadb: 'mysql',
  sqlite: 'sqlite',
  redis: 'redis',
  mongodb: 'mongodb',
  dynamodb: 'dynamodb',
  etcd: 'etcd',
  zookeeper: 'zookeeper',
  nats: 'nats',
  memcached: 'memcached',
}

/** `shedlock schema`. */
export const schemaCommand: Command = {
  name: 'schema',
  summary: 'print the CREATE TABLE (or what else a store needs) for your migrations',
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
    const scheme = NAMES[given.toLowerCase()] ?? (given.includes(':') ? parseStoreUrl(given).scheme : undefined)
    if (!scheme) throw new UsageError(`unknown store ${JSON.stringify(given)}: use ${Object.keys(NAMES).join(', ')}`)
    process.stdout.write(`${schemaText(scheme, values.table)}\n`)
    return EXIT_OK
  },
}

/** What `shedlock schema` prints for `scheme`. */
export function schemaText(scheme: StoreScheme, table: string | undefined): string {
  switch (scheme) {
    case 'postgres':
      return postgresSchema({ tableName: table ?? 'shedlock' })
    case 'mysql':
      return mysqlSchema({ tableName: table ?? 'shedlock' })
    case 'sqlite':
      return sqliteSchema({ tableName: table ?? 'shedlock' })
    case 'mongodb':
      return [
        `// One document per lock: { _id: <lock name>, lockUntil: Date, lockedAt: Date, lockedBy: string }.`,
        `// No index is needed: _id is the lock name.`,
        `db.createCollection(${JSON.stringify(table ?? 'shedLock')})`,
      ].join('\n')
    case 'dynamodb':
      return [
        `# One item per lock: _id (the lock name, partition key), lockUntil, lockedAt, lockedBy (ISO-8601 strings).`,
        `aws dynamodb create-table --table-name ${shellWord(table ?? 'Shedlock')} \\`,
        `  --attribute-definitions AttributeName=_id,AttributeType=S \\`,
        `  --key-schema AttributeName=_id,KeyType=HASH \\`,
        `  --billing-mode PAY_PER_REQUEST`,
      ].join('\n')
    case 'nats':
      noTable(scheme, table, 'name the bucket in the URL: nats://HOST:PORT?bucket=NAME')
      return [
        `# One key per lock (the lock name, see natsLockKey), value: lockUntil as 8 bytes, big-endian epoch ms.`,
        `# Keep one value per key and no TTL: a TTL shorter than lockAtMostFor would drop held locks.`,
        `nats kv add ${NATS_LOCK_BUCKET} --history 1`,
      ].join('\n')
    case 'redis':
      noTable(scheme, table, 'locks are keys')
      return `# Redis needs no schema: each lock is a key job-lock:<environment>:<name> holding ADDED:<ISO time>@<owner>, with an expiry.`
    case 'etcd':
      noTable(scheme, table, 'locks are keys')
      return `# etcd needs no schema: each lock is a key shedlock:<environment>:<name> holding ADDED:<ISO time>@<owner>, attached to a lease.`
    case 'memcached':
      noTable(scheme, table, 'locks are keys')
      return `# memcached needs no schema: each lock is a key shedlock:<environment>:<name> holding ADDED:<ISO time>@<owner>, with an expiry.`
    case 'zookeeper':
      noTable(scheme, table, 'name the parent node in the URL: zookeeper://HOST:PORT?path=/shedlock')
      return `# ZooKeeper needs no schema: each lock is a persistent node /shedlock/<name> holding lockUntil as ISO-8601 text; "shedlock init" creates /shedlock.`
  }
}

function noTable(scheme: StoreScheme, table: string | undefined, instead: string): void {
  if (table !== undefined) throw new UsageError(`--table does not apply to ${scheme}: ${instead}`)
}

/** `word` quoted for a POSIX shell when it needs quoting. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_.-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}
