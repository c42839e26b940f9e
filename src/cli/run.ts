import { formatDuration } from '../core/duration.ts'
import { LockProviderError } from '../core/errors.ts'
import { keepAliveLockProvider } from '../core/keep-alive.ts'
import { lockConfiguration } from '../core/lock-configuration.ts'
import type { ExtensibleLockProvider } from '../core/lock-provider.ts'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import {
  CliError,
  type Command,
  durationOption,
  EXIT_OK,
  integerOption,
  messageOf,
  parseOptions,
  UsageError,
} from './command.ts'
import { CommandFailedError, SignalRelay, signalNumber } from './command-process.ts'
import { describeHolder } from './lock-table.ts'
import type { LockRecord } from '../core/lock-inspector.ts'
import type { RunLedger } from '../core/run-ledger.ts'
import type { TaskResult } from '../core/task.ts'
import type { StoreAdmin } from '../support/store-admin.ts'
import { redactSecrets } from '../support/store-url.ts'
import { withStore } from './open-store.ts'
import { tableOption } from './operator-options.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock run [--url URL] [--table NAME] --name NAME
                    --lock-at-most-for D [--lock-at-least-for D] [--keep-alive]
                    [--slot minute|hour|day|ISO] [--every D] [--quiet | --json]
                    [--skipped-exit-code N] [--runs-table T | --no-history]
                    -- COMMAND [ARGS...]

Runs COMMAND under the lock NAME: put it in the crontab of every host, and at
each tick exactly one host runs COMMAND; the others print one line
  skipped: lock "NAME" is held by HOLDER until TIME (LEFT left)
and exit 0 (or --skipped-exit-code) at once: they never wait. COMMAND gets
this process's stdin, stdout and stderr; its exit code is shedlock's, and a
COMMAND killed by a signal makes shedlock exit 128 + the signal's number
(SIGTERM: 143). SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to shedlock are
passed on to COMMAND. One that comes before COMMAND started (while shedlock
connects or takes the lock) stops it from starting: shedlock prints
  shedlock run: SIGTERM before the command started: the command will not be run
on stderr and exits 128 + the signal's number. With --slot, the slot is given
back: a later run for it (on any host) still runs COMMAND.

When COMMAND exits the lock is released, but held until --lock-at-least-for
after the start. If this host dies, the lock frees itself after
--lock-at-most-for: set it well above COMMAND's longest run, or use
--keep-alive.

Where the store hands out fencing tokens, COMMAND gets its lock's in the
environment variable SHEDLOCK_FENCING_TOKEN (a decimal integer, greater than
every earlier one for NAME): pass it with each write to a resource that
checks it (docs/fencing.md). PostgreSQL, MySQL/MariaDB and SQLite hand them
out when the lock table has the fencing_token column ("shedlock init
--fencing-tokens" adds it; shedlock looks once per run), Redis always. Where
the store hands out none, the variable is absent (removed if shedlock
inherited one).

Where the store keeps a run history for the URL (SQL: once "shedlock init"
created its table; Redis: always), each run is recorded there, as executors
record theirs: outcome ok when COMMAND exits 0, failed otherwise (the error
says the exit code or the signal), skipped for a --slot run that found the
lock held. "shedlock history NAME" and "shedlock status --stale" read it.
With --every, each run also records when the next is due, so that "shedlock
status" says the task is overdue once that passes with no run since: the
crontab line was removed, cron stopped, or every host is down.

Options:
${URL_HELP}
  --name NAME              the lock, shared by every host that runs COMMAND
  --lock-at-most-for D     how long the lock is held if this host dies or
                           COMMAND hangs: 500ms, 30s, 10m, 2h, 1d, or PT10M
  --lock-at-least-for D    the shortest time the lock is held, even if COMMAND
                           ends sooner; covers hosts whose cron fires late
                           (default: 0)
  --keep-alive             extend the lock every lock-at-most-for / 2 while
                           COMMAND runs, so lock-at-most-for only matters when
                           this host dies (needs lock-at-most-for >= 30s, and a
                           store whose locks can be extended: not memcached)
  --slot minute|hour|day   run COMMAND at most once per slot across hosts, the
                           slot being the current time on this host truncated
                           to the minute, hour or day (UTC): hosts whose
                           crontabs fire for the same minute agree even when
                           their clocks differ by seconds. A host that comes
                           later, even after the lock was released, prints
                             skipped: slot TIME of lock "NAME" already ran ...
                           and exits 0. Take a unit no longer than the
                           crontab's period; the slot is remembered for 24h
  --slot ISO               the same with an explicit slot, e.g.
                           2026-11-24T02:00:00Z (with a zone)
  --every D                the crontab line's period (1m, 1h, 1d): the run
                           records its next one as due D after its slot (or,
                           without --slot, after its start)
  --quiet                  print nothing when skipped
  --json                   print the skip as one JSON line instead: { skipped:
                           true, reason: "held" or "slot-done", name, slot,
                           lockedBy, lockedAt, lockUntil } (ISO times; null
                           where unknown); stopped by a signal before COMMAND
                           started: reason "stopped" and signal (e.g.
                           "SIGTERM")
  --skipped-exit-code N    exit N (0-255) when skipped (default: 0), so that a
                           script can tell a skip from a run, as flock -E does
  --runs-table T           the run history's table (SQL; default:
                           shedlock_runs); a missing one is a warning
  --no-history             record nothing in the run history
  -h, --help               show this help

Crontab (every host, every night at 02:00):
  SHEDLOCK_URL=postgres://cron@db/app
  0 2 * * * shedlock run --name report --lock-at-most-for 30m -- /opt/report.sh

Exit codes: COMMAND's exit code when it ran (128 + N when killed by signal N),
            0 (or --skipped-exit-code) skipped because another host holds
            the lock, or ran the slot,
            128 + N stopped by signal N before COMMAND started (not run),
            1 the store failed (COMMAND was not run), 2 usage error,
            126 COMMAND is not executable, 127 COMMAND not found
`

const KEEP_ALIVE_MINIMUM_MS = 30_000

/** `shedlock run`. */
export const runCommand: Command = {
  name: 'run',
  summary: 'run a command under a lock: one host of a crontab fleet runs it',
  help: HELP,
  async run(args) {
    const parsed = parseRunArgs(args)
    const { file, fileArgs, name, options, keepAlive, slot, due, quiet, json, skippedExitCode } = parsed
    const { url, table, runsTable, history } = parsed

    const signals = new SignalRelay()
    try {
      return await withStore(url, { table, runsTable }, async (store) => {
        if (keepAlive && !store.extensible)
          throw new UsageError(`--keep-alive needs a store whose locks can be extended; ${store.kind} locks cannot be`)
        const provider = keepAlive
          ? keepAliveLockProvider(store.provider() as ExtensibleLockProvider)
          : store.provider()
        const warn = (line: string): void =>
          void process.stderr.write(redactSecrets(`shedlock run: warning: ${line}\n`))
        const runLedger = history ? await readyLedger(store, runsTable, url.redacted, warn) : undefined
        const executor = createLockingTaskExecutor(provider, {
          runLedger,
          // A crontab line's process ends with its command: a slot it owed would wait for a
          // drain no later run of this command makes (they take the lock, not the owed slots).
          overlap: 'skip',
          listener: {
            onRunLedgerFailed: (configuration, error) =>
              warn(
                `could not record this run of "${configuration.name}" in the run history (${messageOf(error)}); the command ran as usual`,
              ),
            onLockLost: (configuration, reason) =>
              warn(
                `${reason.message}; lock "${configuration.name}" may be taken by another host while the command still runs`,
              ),
            onUnlockFailed: (configuration, error) =>
              warn(
                `could not release lock "${configuration.name}" (${messageOf(error)}); it stays held until ${configuration.lockAtMostUntil.toISOString()}`,
              ),
          },
        })
        // A signal before the command started: the executor runs nothing more, so the task never
        // starts, and a slot claimed for it is given back for another host or a later run.
        signals.beforeStart(() => void executor.close())
        let outcome: TaskResult<0>
        try {
          outcome = await executor.executeWithLock(({ fencingToken }) => signals.run(file, fileArgs, fencingToken), {
            ...options,
            ...(slot === undefined ? {} : { slot }),
            ...(due === undefined ? {} : { nextFireAt: () => due }),
          })
        } catch (error) {
          if (error instanceof CommandFailedError) return error.exitCode
          if (!(error instanceof LockProviderError)) throw error
          // A missing table says how to create it, rather than quoting the DDL.
          const broken = (await store.structure().catch(() => [])).find((check) => check.status === 'fail')
          const why = broken
            ? `could not take lock ${JSON.stringify(name)}: ${broken.label} ${broken.detail}`
            : error.message
          throw new CliError(`${why}; the command was not run`, { cause: error })
        }
        if (outcome.executed) return outcome.result
        if (outcome.reason === 'closed') {
          // Only a signal closes this executor: its line went to stderr when it arrived.
          const signal = signals.received ?? 'SIGTERM'
          if (json) {
            const stop = {
              skipped: true,
              reason: 'stopped',
              signal,
              name,
              slot: slot?.toISOString() ?? null,
              lockedBy: null,
              lockedAt: null,
              lockUntil: null,
            }
            process.stdout.write(`${JSON.stringify(stop)}\n`)
          }
          return 128 + signalNumber(signal)
        }
        if (json) {
          const record =
            outcome.reason === 'slot-done' ? undefined : await store.inspector.get(name).catch(() => undefined)
          const held = record?.held === true
          const skip = {
            skipped: true,
            reason: outcome.reason,
            name,
            slot: slot?.toISOString() ?? null,
            lockedBy: held ? (record.lockedBy ?? null) : null,
            lockedAt: held ? (record.lockedAt?.toISOString() ?? null) : null,
            lockUntil: held ? (record.lockUntil?.toISOString() ?? null) : null,
          }
          process.stdout.write(`${JSON.stringify(skip)}\n`)
        } else if (!quiet && outcome.reason === 'slot-done') {
          process.stdout.write(
            `skipped: slot ${slot!.toISOString()} of lock ${JSON.stringify(name)} already ran (or was skipped) on another host\n`,
          )
        } else if (!quiet) process.stdout.write(`${await skippedLine(() => store.inspector.get(name), name)}\n`)
        return signals.received === undefined ? skippedExitCode : 128 + signalNumber(signals.received)
      })
    } finally {
      signals.stop()
    }
  },
}

/** The arguments of `shedlock run`, checked before anything connects. @throws UsageError */
function parseRunArgs(args: string[]) {
  const separator = args.indexOf('--')
  const commandLine = separator < 0 ? [] : args.slice(separator + 1)
  const values = parseOptions(separator < 0 ? args : args.slice(0, separator), {
    url: { type: 'string' },
    table: { type: 'string' },
    name: { type: 'string' },
    'lock-at-most-for': { type: 'string' },
    'lock-at-least-for': { type: 'string' },
    'keep-alive': { type: 'boolean' },
    slot: { type: 'string' },
    every: { type: 'string' },
    quiet: { type: 'boolean' },
    json: { type: 'boolean' },
    'skipped-exit-code': { type: 'string' },
    'runs-table': { type: 'string' },
    'no-history': { type: 'boolean' },
  })
  const [file, ...fileArgs] = commandLine
  if (file === undefined || file === '')
    throw new UsageError(
      'give the command to run after --, e.g. shedlock run --name NAME --lock-at-most-for 10m -- ./job.sh',
    )
  const name = values.name
  if (typeof name !== 'string')
    throw new UsageError('--name NAME is required: the lock every host shares for this command')
  const mostFor = values['lock-at-most-for']
  if (typeof mostFor !== 'string')
    throw new UsageError('--lock-at-most-for is required: how long the lock holds if this host dies, e.g. 10m')
  const leastFor = typeof values['lock-at-least-for'] === 'string' ? values['lock-at-least-for'] : '0'
  // Validated before connecting; each attempt takes a fresh configuration (its deadlines count from now).
  const options = {
    name,
    lockAtMostFor: durationOption('--lock-at-most-for', mostFor),
    lockAtLeastFor: durationOption('--lock-at-least-for', leastFor),
  }
  lockConfiguration(options)
  const keepAlive = values['keep-alive'] === true
  if (keepAlive && options.lockAtMostFor < KEEP_ALIVE_MINIMUM_MS) {
    throw new UsageError(
      `--keep-alive needs --lock-at-most-for of at least ${formatDuration(KEEP_ALIVE_MINIMUM_MS)} (got ${mostFor}): it extends the lock every lock-at-most-for / 2`,
    )
  }
  const slot = typeof values.slot === 'string' ? slotOption(values.slot, Date.now()) : undefined
  const everyMs =
    typeof values.every === 'string'
      ? durationOption('--every', values.every, { zero: false, hint: "the crontab line's period, e.g. 1h" })
      : undefined
  // From the slot, whose time every host agrees on; else from now, a cron tick's start.
  const due = everyMs === undefined ? undefined : new Date((slot?.getTime() ?? Date.now()) + everyMs)
  const quiet = values.quiet === true
  const json = values.json === true
  if (quiet && json) throw new UsageError('--quiet and --json contradict each other; pass one')
  const skippedExitCode = integerOption(values, 'skipped-exit-code', EXIT_OK, 0, 255)
  const url = storeUrlOption(values)
  const table = tableOption(values)
  const runsTable = typeof values['runs-table'] === 'string' ? values['runs-table'] : undefined
  const history = values['no-history'] !== true
  return {
    file,
    fileArgs,
    name,
    options,
    keepAlive,
    slot,
    due,
    quiet,
    json,
    skippedExitCode,
    url,
    table,
    runsTable,
    history,
  }
}

const SLOT_UNITS: Readonly<Record<string, number>> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 }

/** `--slot`: `minute`, `hour` or `day` (now, truncated, UTC), or an ISO date-time with a zone. */
function slotOption(value: string, now: number): Date {
  if (Object.hasOwn(SLOT_UNITS, value)) return new Date(Math.floor(now / SLOT_UNITS[value]!) * SLOT_UNITS[value]!)
  const slot = new Date(value)
  if (
    !/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}))?$/i.test(value) ||
    Number.isNaN(slot.getTime())
  ) {
    throw new UsageError(
      `--slot: expected minute, hour, day or an ISO date-time with a zone (2026-11-24T02:00:00Z), got ${JSON.stringify(value)}`,
    )
  }
  return slot
}

async function skippedLine(get: () => Promise<LockRecord | undefined>, name: string): Promise<string> {
  try {
    const record = await get()
    if (record?.held) return `skipped: lock ${JSON.stringify(name)} is ${describeHolder(record)}`
    return `skipped: lock ${JSON.stringify(name)} was held by another process (it has been released since)`
  } catch (error) {
    return `skipped: lock ${JSON.stringify(name)} is held by another process (could not read its holder: ${messageOf(error)})`
  }
}

/**
 * The store's run ledger when it is set up for this URL, else `undefined`: without one, `run`
 * records nothing, as before there was a history. Not being able to tell is no history either:
 * the lock attempt that follows reports a failing store.
 */
async function readyLedger(
  store: StoreAdmin,
  runsTable: string | undefined,
  where: string,
  warn: (line: string) => void,
): Promise<RunLedger | undefined> {
  if (!store.runLedger || !store.runLedgerReady) return undefined
  if (await store.runLedgerReady().catch(() => false)) return store.runLedger
  // Only a table the user named is worth a line; the default one is simply not set up.
  if (runsTable !== undefined)
    warn(
      `no run history table ${runsTable}; create it with: shedlock init --url ${where} --runs-table ${runsTable}; this run is not recorded`,
    )
  return undefined
}
