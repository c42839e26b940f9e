import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { formatDuration, parseDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import { type Command, EXIT_FAILURE, EXIT_OK, messageOf, parseOptions, UsageError } from './command.ts'
import type { Check, ClockReading, StoreAdmin } from '../support/store-admin.ts'
import { openStore } from './open-store.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock doctor [--url URL] [--table NAME] [--runs-table T]
                       [--fencing-tokens] [--max-offset DURATION] [--json]

Checks that the store is ready for shedlock, one line per check:
  reachable   connects and makes a round trip (server version)
  layout      SQL: the table exists with the columns name, lock_until,
              locked_at, locked_by and primary key (name); MongoDB: the
              collection; DynamoDB: the table's key schema; NATS: the bucket;
              ZooKeeper: the parent node
  write       takes and releases a lock named shedlock-doctor-<random>
              through the provider, reads it back in between, then removes
              its record
  run history where the store keeps one (PostgreSQL, MySQL, SQLite, Redis):
              the runs table exists and can be read. It is optional: a missing
              one is a note (--), a failure only when --runs-table names it
  clock       the offset between this host's clock and the store's, where the
              store has a clock to read (PostgreSQL, MySQL, Redis, MongoDB,
              DynamoDB, ZooKeeper, NATS, memcached); a warning beyond
              --max-offset. Providers that decide expiry on the app clock
              (MongoDB, DynamoDB, ZooKeeper, NATS, SQL with useDbTime: false)
              need the hosts' clocks in sync.

Options:
${URL_HELP}
  --runs-table T the run history's table (default: shedlock_runs); given, it
                 must exist
  --fencing-tokens
                 SQL: the lock table must have the fencing_token column
                 (fencingTokens: true), and the write check takes its lock
                 with a token. Without it, the column is reported if present
  --max-offset D the clock offset that is still fine (default: 1s)
  --json         print JSON instead: { store, healthy, checks: [{ label,
                 status: "ok", "warn", "fail" or "skip", detail }] }
  -h, --help     show this help

Exit codes: 0 every check passed (warnings allowed), 1 a check failed,
            2 usage error
`

const MARK = { ok: 'ok', warn: 'WARN', fail: 'FAIL', skip: '--' } as const

/** `shedlock doctor`. */
export const doctorCommand: Command = {
  name: 'doctor',
  summary: 'check the store: reachable, table layout, a lock round trip, clock',
  help: HELP,
  async run(args) {
    const values = parseOptions(args, {
      url: { type: 'string' },
      table: { type: 'string' },
      'runs-table': { type: 'string' },
      'fencing-tokens': { type: 'boolean' },
      'max-offset': { type: 'string' },
      json: { type: 'boolean' },
    })
    const runsTable = typeof values['runs-table'] === 'string' ? values['runs-table'] : undefined
    const json = values.json === true
    let maxOffset: number
    try {
      maxOffset = parseDuration(typeof values['max-offset'] === 'string' ? values['max-offset'] : '1s')
    } catch (error) {
      throw new UsageError(`--max-offset: ${messageOf(error)}`)
    }
    const url = storeUrlOption(values)
    const table = typeof values.table === 'string' ? values.table : undefined
    const print = (check: Check): void =>
      void process.stdout.write(`  ${MARK[check.status].padEnd(4)}  ${check.label}: ${check.detail}\n`)
    const checks: Check[] = []
    const report = (check: Check): void => {
      checks.push(check)
      if (!json) print(check)
    }
    const summary = (): number => (json ? jsonSummary(url.redacted, checks) : textSummary(checks))

    if (!json) process.stdout.write(`shedlock doctor: ${url.redacted}\n`)
    let store: StoreAdmin
    try {
      store = await openStore(url, { table, runsTable, fencingTokens: values['fencing-tokens'] === true })
    } catch (error) {
      if (error instanceof UsageError || error instanceof LockConfigurationError) throw error
      report({ status: 'fail', label: 'reachable', detail: messageOf(error) })
      return summary()
    }
    try {
      await runChecks(store, maxOffset, runsTable !== undefined, report)
    } finally {
      await store.close().catch(() => {})
    }
    return summary()
  },
}

async function runChecks(
  store: StoreAdmin,
  maxOffset: number,
  runsRequired: boolean,
  report: (check: Check) => void,
): Promise<void> {
  const started = Date.now()
  try {
    const server = await store.ping()
    report({ status: 'ok', label: 'reachable', detail: `${server}, ${Date.now() - started} ms round trip` })
  } catch (error) {
    report({ status: 'fail', label: 'reachable', detail: messageOf(error) })
    return
  }

  let layoutOk = true
  try {
    for (const check of await store.structure()) {
      report(check)
      if (check.status === 'fail') layoutOk = false
    }
  } catch (error) {
    report({ status: 'fail', label: 'layout', detail: messageOf(error) })
    layoutOk = false
  }

  if (layoutOk) report(await writeCheck(store))
  else report({ status: 'skip', label: 'write', detail: 'not tried: fix the layout first' })

  const runs = await runsCheck(store, runsRequired)
  if (runs) report(runs)

  report(await clockCheck(store, maxOffset))
}

async function writeCheck(store: StoreAdmin): Promise<Check> {
  const name = `shedlock-doctor-${randomBytes(4).toString('hex')}`
  const label = 'write'
  const steps: string[] = []
  let taken = false
  try {
    const lock = await store.provider().lock(lockConfiguration({ name, lockAtMostFor: '30s' }))
    if (!lock)
      return { status: 'fail', label, detail: `could not take the fresh lock "${name}" though nobody holds it` }
    taken = true
    const held = await store.inspector.get(name)
    if (!held?.held) {
      await lock.unlock()
      return {
        status: 'fail',
        label,
        detail: `took lock "${name}" but read it back as ${held ? 'free' : 'missing'}: the store does not keep what the provider writes`,
      }
    }
    const by = held.lockedBy
    if (by !== undefined && !by.startsWith(`${hostname()}:`)) {
      await lock.unlock()
      return { status: 'fail', label, detail: `took lock "${name}" but read it back held by ${by}, not by this host` }
    }
    steps.push(`took lock "${name}" (read back held${by === undefined ? '' : ` by ${by}`})`)
    await lock.unlock()
    const released = await store.inspector.get(name)
    if (released?.held) {
      return { status: 'fail', label, detail: `${steps.join(', ')}, released it, but it still reads as held` }
    }
    steps.push('released it')
    await store.remove(name)
    taken = false
    if (await store.inspector.get(name))
      return { status: 'fail', label, detail: `${steps.join(', ')}, but its record could not be removed` }
    steps.push('removed its record')
    return { status: 'ok', label, detail: steps.join(', ') }
  } catch (error) {
    if (taken) await store.remove(name).catch(() => {})
    return {
      status: 'fail',
      label,
      detail: `${steps.length > 0 ? `${steps.join(', ')}, then: ` : ''}${messageOf(error)}`,
    }
  }
}

/** The run history, where the store keeps one: optional, so a missing table is a note unless `required`. */
async function runsCheck(store: StoreAdmin, required: boolean): Promise<Check | undefined> {
  const ledger = store.runLedger
  if (!ledger) return undefined
  const table = store.runsTable
  const label = table ? `table ${table.name} (run history)` : 'run history'
  try {
    if (table && !(await table.exists())) {
      return {
        status: required ? 'fail' : 'skip',
        label,
        detail: `does not exist${required ? '' : ' (optional: shedlock history and status read it)'}; create it with: ${table.initCommand}`,
      }
    }
    const missing = table ? await table.missingColumns() : []
    if (missing.length > 0)
      return {
        status: 'warn',
        label,
        detail: `lacks the column${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of this version (${missing.map(withoutColumn).join('; ')}); add ${missing.length > 1 ? 'them' : 'it'} with: ${table!.initCommand}`,
      }
    await ledger.history(`shedlock-doctor-${randomBytes(4).toString('hex')}`, { limit: 1 })
    return { status: 'ok', label, detail: table ? 'exists and can be read' : 'can be read' }
  } catch (error) {
    return { status: 'fail', label, detail: messageOf(error) }
  }
}

async function clockCheck(store: StoreAdmin, maxOffset: number): Promise<Check> {
  const label = 'clock'
  let reading: ClockReading | string
  try {
    reading = await store.readClock()
  } catch (error) {
    return { status: 'fail', label, detail: `could not read the ${store.kind} clock: ${messageOf(error)}` }
  }
  if (typeof reading === 'string') return { status: 'skip', label, detail: reading }
  const { offset, uncertainty } = clockOffset(reading)
  const direction = offset >= 0 ? 'ahead of' : 'behind'
  const beyond = Math.abs(offset) - uncertainty > maxOffset
  const measured = `this host is ${Math.round(Math.abs(offset))} ms ${direction} the ${store.kind} clock (±${Math.max(1, Math.ceil(uncertainty))} ms, by ${reading.source}; limit ${formatDuration(maxOffset)})`
  return {
    status: beyond ? 'warn' : 'ok',
    label,
    detail: `${measured}${beyond ? '; sync this host with NTP' : ''}${store.clockDependence ? `; ${store.clockDependence}` : ''}`,
  }
}

/**
 * This host's clock minus the store's, in milliseconds, and how far off that estimate may be: the
 * store read its clock somewhere between `before` and `after`, and a clock that ticks in whole
 * seconds was somewhere within its tick.
 */
export function clockOffset(reading: ClockReading): { offset: number; uncertainty: number } {
  const local = (reading.before + reading.after) / 2
  const store = reading.storeMs + (reading.resolutionMs > 1 ? reading.resolutionMs / 2 : 0)
  return {
    offset: local - store,
    uncertainty: (reading.after - reading.before) / 2 + (reading.resolutionMs > 1 ? reading.resolutionMs / 2 : 0),
  }
}

/** `--json`: one document, printed once every check has run; the exit code as for the text. */
function jsonSummary(store: string, checks: readonly Check[]): number {
  const failed = checks.some((c) => c.status === 'fail')
  const document = {
    store,
    healthy: !failed,
    checks: checks.map(({ label, status, detail }) => ({ label, status, detail })),
  }
  process.stdout.write(`${JSON.stringify(document, null, 2)}\n`)
  return failed ? EXIT_FAILURE : EXIT_OK
}

function textSummary(checks: readonly Check[]): number {
  const count = (status: Check['status']): number => checks.filter((c) => c.status === status).length
  const failed = count('fail')
  const parts = [`${count('ok')} ok`, `${count('warn')} warning${count('warn') === 1 ? '' : 's'}`, `${failed} failed`]
  process.stdout.write(`${failed > 0 ? 'unhealthy' : 'healthy'}: ${parts.join(', ')}\n`)
  return failed > 0 ? EXIT_FAILURE : EXIT_OK
}

// What a runs table without `column` (one of the later run columns) cannot show.
function withoutColumn(column: string): string {
  return column === 'next_fire_at'
    ? 'without next_fire_at no task reads as overdue'
    : column === 'triggered_by'
      ? 'without triggered_by a triggered run reads as scheduled'
      : `without ${column}`
}
