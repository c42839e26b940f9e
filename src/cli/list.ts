import { type Command, EXIT_OK, parseOptions, UsageError } from './command.ts'
import { formatLocks, isoUtc, lockJson } from './lock-table.ts'
import { stateOf, withStore } from './store.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock list [--url URL] [--table NAME] [--json | --format table|json]

Shows every lock in the store: its name, state (held or free), who holds or
last held it, when it was taken, until when it is held, and the time left.
"Now" is the store's clock where it has one (PostgreSQL, MySQL, SQLite, Redis,
MongoDB; etcd gives remaining lease time), else this host's; the first line
says which.

A lock whose task finished but whose lockAtLeastFor has not passed shows as
held: the storage format, shared with Java ShedLock, does not record whether
the task ended.

Options:
${URL_HELP}
  --json         print JSON: { store, clock, now, locks: [{ name, state,
                 lockedBy, lockedAt, lockUntil, remainingMs }] }, times in
                 ISO-8601 UTC, null where the store does not keep them
  --format F     table (the default) or json
  -h, --help     show this help

memcached cannot enumerate its keys: list fails there (exit 1); use
"shedlock unlock --name NAME" to see one lock.

Exit codes: 0 listed, 1 the store failed or cannot list, 2 usage error
`

/** `shedlock list`. */
export const listCommand: Command = {
  name: 'list',
  summary: 'show every lock: holder, since when, until when, time left',
  help: HELP,
  async run(args) {
    const values = parseOptions(args, { url: { type: 'string' }, table: { type: 'string' }, json: { type: 'boolean' }, format: { type: 'string' } })
    if (values.format !== undefined && values.format !== 'table' && values.format !== 'json') {
      throw new UsageError(`--format must be table or json, got ${JSON.stringify(values.format)}`)
    }
    if (values.json === true && values.format === 'table') throw new UsageError('--json and --format table contradict each other; pass one')
    const json = values.json === true || values.format === 'json'
    const url = storeUrlOption(values)
    const table = typeof values.table === 'string' ? values.table : undefined
    return withStore(url, { table }, async (store) => {
      const { now, clock, value: records } = await store.list()
      if (json) {
        const out = { store: store.where, clock, now: isoUtc(now), locks: records.map((record) => lockJson(record, now)) }
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
        return EXIT_OK
      }
      const held = records.filter((record) => stateOf(record, now) === 'held').length
      process.stdout.write(`${store.kind} ${store.where}: ${records.length} lock${records.length === 1 ? '' : 's'}, ${held} held; now ${isoUtc(now)} on ${clock}\n`)
      if (records.length > 0) process.stdout.write(`\n${formatLocks(records, now)}\n`)
      return EXIT_OK
    })
  },
}
