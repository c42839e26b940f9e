import { type Command, EXIT_OK, parseOptions } from './command.ts'
import { withStore } from './open-store.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock init [--url URL] [--table NAME] [--runs-table T]
                     [--fencing-tokens] [--json]

Creates what the store's provider needs, if it is missing, and says what it did:
  SQL         the lock table and the run history's table (the DDL of
              "shedlock schema"); SQLite: the database file too, in WAL mode
  MongoDB     the collection
  DynamoDB    the table (partition key _id, on-demand), waiting until ACTIVE
  NATS        the KV bucket (one value per key, no TTL)
  ZooKeeper   the parent node (/shedlock)
  Redis, etcd, memcached need nothing.
Safe to run again: an existing table is left as it is ("shedlock doctor"
checks its columns).

Options:
${URL_HELP}
  --runs-table T the run history's table (SQL; default: shedlock_runs)
  --fencing-tokens
                 SQL: the lock table gets the fencing_token column that
                 providers with fencingTokens: true need (BIGINT NULL); an
                 existing table without it gets it (ALTER TABLE ... ADD COLUMN)
  --json         print JSON instead: { store, kind, done: [what it did or
                 found, one string each] }
  -h, --help     show this help

Exit codes: 0 done (or nothing to do), 1 the store failed, 2 usage error
`

/** `shedlock init`. */
export const initCommand: Command = {
  name: 'init',
  summary: 'create the lock table, collection, bucket or node if missing',
  help: HELP,
  async run(args) {
    const values = parseOptions(args, {
      url: { type: 'string' },
      table: { type: 'string' },
      'runs-table': { type: 'string' },
      'fencing-tokens': { type: 'boolean' },
      json: { type: 'boolean' },
    })
    const url = storeUrlOption(values)
    const table = typeof values.table === 'string' ? values.table : undefined
    const runsTable = typeof values['runs-table'] === 'string' ? values['runs-table'] : undefined
    const fencingTokens = values['fencing-tokens'] === true
    return withStore(url, { table, runsTable, create: true, fencingTokens }, async (store) => {
      const done = await store.init()
      if (values.json === true)
        process.stdout.write(`${JSON.stringify({ store: store.where, kind: store.kind, done }, null, 2)}\n`)
      else for (const line of done) process.stdout.write(`${store.kind} ${store.where}: ${line}\n`)
      return EXIT_OK
    })
  },
}
