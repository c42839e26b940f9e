import { parseSlotRecordName } from '../core/slots.ts'
import { type Command, EXIT_OK, parseOptions, UsageError } from './command.ts'
import { formatLocks, isoUtc, lockJson, stateOf } from './lock-table.ts'
import { withStore } from './open-store.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock list [--url URL] [--table NAME] [--prefix P] [--slots]
                     [--json | --format table|json]

Shows every lock in the store: its name, state (held, free, paused by
"shedlock pause", or triggered: a pending "shedlock trigger", the record
NAME@trigger), who holds or last held it, when it was taken, until when
it is held, and the time left. "Now" is the store's clock where expiry is
decided on it (PostgreSQL, MySQL, Redis; etcd gives remaining lease time),
else this host's (SQLite, and MongoDB, whose locks expire on each node's
clock); the first line says which.

A lock whose task finished but whose lockAtLeastFor has not passed shows as
held: the storage format, shared with Java ShedLock, does not record whether
the task ended.

Slot records (NAME@20261124T020000Z, one per scheduled run of a task that
runs once per slot) are hidden unless --slots is given; the first line counts
them.

Options:
${URL_HELP}
  --prefix P     only the locks whose name starts with P
  --slots        show slot records too
  --json         print JSON: { store, clock, now, locks: [{ name, state,
                 lockedBy, lockedAt, lockUntil, remainingMs }],
                 slotRecords }, times in ISO-8601 UTC, null where the store
                 does not keep them; slotRecords counts the slot records
  --format F     table (the default) or json
  -h, --help     show this help

memcached cannot enumerate its keys: list fails there (exit 1); use
"shedlock unlock NAME" to see one lock.

Exit codes: 0 listed, 1 the store failed or cannot list, 2 usage error
`

/** `shedlock list`. */
export const listCommand: Command = {
  name: 'list',
  summary: 'show every lock: holder, since when, until when, time left',
  help: HELP,
  async run(args) {
    const values = parseOptions(args, {
      url: { type: 'string' },
      table: { type: 'string' },
      json: { type: 'boolean' },
      format: { type: 'string' },
      prefix: { type: 'string' },
      slots: { type: 'boolean' },
    })
    if (values.format !== undefined && values.format !== 'table' && values.format !== 'json') {
      throw new UsageError(`--format must be table or json, got ${JSON.stringify(values.format)}`)
    }
    if (values.json === true && values.format === 'table')
      throw new UsageError('--json and --format table contradict each other; pass one')
    const json = values.json === true || values.format === 'json'
    const url = storeUrlOption(values)
    const table = typeof values.table === 'string' ? values.table : undefined
    return withStore(url, { table }, async (store) => {
      const { clock } = store.inspector
      const { now, locks: all } = await store.inspector.list(
        typeof values.prefix === 'string' ? { prefix: values.prefix } : undefined,
      )
      const slotRecords = all.filter((record) => parseSlotRecordName(record.name) !== undefined).length
      const records =
        values.slots === true ? all : all.filter((record) => parseSlotRecordName(record.name) === undefined)
      if (json) {
        const out = {
          store: store.where,
          clock,
          now: isoUtc(now),
          locks: records.map((record) => lockJson(record)),
          slotRecords,
        }
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
        return EXIT_OK
      }
      const held = records.filter((record) => record.held).length
      const paused = records.filter((record) => stateOf(record) === 'paused').length
      const hidden =
        values.slots === true || slotRecords === 0
          ? ''
          : ` (${slotRecords} slot record${slotRecords === 1 ? '' : 's'} hidden: --slots)`
      process.stdout.write(
        `${store.kind} ${store.where}: ${records.length} lock${records.length === 1 ? '' : 's'}, ${held} held${paused === 0 ? '' : ` (${paused} paused)`}${hidden}; now ${isoUtc(now)} on ${clock}\n`,
      )
      if (records.length > 0) process.stdout.write(`\n${formatLocks(records, now)}\n`)
      return EXIT_OK
    })
  },
}
