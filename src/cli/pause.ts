import { formatDuration } from '../core/duration.ts'
import { LockConfigurationError } from '../core/errors.ts'
import type { LockRecord } from '../core/lock-inspector.ts'
import { describePause, pauseHolder, type TaskPause } from '../core/pause.ts'
import type { StoreAdmin } from '../support/store-admin.ts'
import { pauseJson } from '../status/health-json.ts'
import { endPause, PauseRefused, takePause } from '../status/pause-control.ts'
import { CliError, type Command, durationOption, EXIT_OK, parseArguments, UsageError } from './command.ts'
import { describeHolder, isoUtc } from './lock-table.ts'
import { withStore } from './open-store.ts'
import { operator, tableOption, taskName } from './operator-options.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const PAUSE_HELP = `Usage: shedlock pause NAME [--for D] [--reason TEXT] [--by WHO] [--wait D]
                      [--url URL] [--table NAME] [--json]
       shedlock pause [options] -- NAME   (a NAME that starts with -)

Pauses task NAME on every node: takes its lock as "paused by WHO — REASON"
and keeps it, so that every node, Java ShedLock's too, finds it held and
skips the task (shedlock's executors report the skip as paused). Fire times
that pass during a pause are not owed: nothing runs them after the resume.

A run that holds the lock is never cut short: pause refuses (exit 1) and
names its holder; --wait D tries again until the run ends, for at most D.
A task already paused stays as it is (exit 0): resume it first to change
who, why or how long.

Options:
${URL_HELP}
  --for D        end the pause by itself after D (90s, 30m, 8h, 7d or PT8H);
                 default: until "shedlock resume" (the lock is held 10 years,
                 or until 2038-01-01 if sooner: MySQL TIMESTAMPs end in 2038)
  --reason TEXT  why, shown by list, status, history and the executors
  --by WHO       who paused it (default: USER@HOST of this shell)
  --wait D       while a run holds the lock, try again until it ends, for at
                 most D (default: do not wait)
  --json         print JSON: { name, result, pause: { by, reason, until } },
                 result being paused or already-paused
  -h, --help     show this help

NATS, ZooKeeper and memcached cannot hold a pause (their locks keep no
holder name); S3 takes ASCII only, so no --reason there.

Exit codes: 0 paused, or already paused; 1 a run holds the lock, the store
            cannot hold a pause, or it failed; 2 usage error
`

const RESUME_HELP = `Usage: shedlock resume NAME [--url URL] [--table NAME] [--json]
       shedlock resume [options] -- NAME   (a NAME that starts with -)

Ends a pause ("shedlock pause"): releases the lock of task NAME if, and only
if, a pause holds it (as it was read: a lock taken since is left alone). The
task runs again at its next fire time; those passed during the pause are not
run. A lock held by a run is refused (exit 1): "shedlock unlock NAME"
force-releases that.

Options:
${URL_HELP}
  --json         print JSON: { name, result, pause }, result being resumed
                 or not-paused, pause the one ended ({ by, reason, until })
                 or null
  -h, --help     show this help

Exit codes: 0 resumed, or not paused; 1 a run holds the lock, the lock
            changed meanwhile, or the store failed; 2 usage error
`

const STORE_OPTIONS = { url: { type: 'string' }, table: { type: 'string' }, json: { type: 'boolean' } } as const

/** `shedlock pause`. */
export const pauseCommand: Command = {
  name: 'pause',
  summary: 'pause a task on every node, until resumed or for a while',
  help: PAUSE_HELP,
  async run(args) {
    const { values, positionals } = parseArguments(args, {
      ...STORE_OPTIONS,
      for: { type: 'string' },
      reason: { type: 'string' },
      by: { type: 'string' },
      wait: { type: 'string' },
    })
    const name = taskName('pause', positionals)
    const forMs = values.for === undefined ? undefined : durationOption('--for', values.for, { zero: false })
    const waitMs = values.wait === undefined ? 0 : durationOption('--wait', values.wait)
    const by = typeof values.by === 'string' ? values.by.trim() : operator()
    if (by === '') throw new UsageError('--by needs a name: who paused the task')
    const reason = typeof values.reason === 'string' && values.reason.trim() !== '' ? values.reason : undefined
    const url = storeUrlOption(values)
    return withStore(url, { table: tableOption(values) }, async (store) => {
      const { result, pause } = await pauseOn(store, name, pauseHolder(by, reason), forMs, waitMs)
      if (values.json === true)
        process.stdout.write(`${JSON.stringify({ name, result, pause: pauseJson(pause) }, null, 2)}\n`)
      else if (result === 'paused') process.stdout.write(`paused ${name} ${pauseText(pause)}\n`)
      else
        process.stdout.write(
          `${name} is already paused ${pauseText(pause)}; left as it is (shedlock resume ${name} first to change it)\n`,
        )
      return EXIT_OK
    })
  },
}

/** `shedlock resume`. */
export const resumeCommand: Command = {
  name: 'resume',
  summary: 'end the pause of a task (never a run: see unlock)',
  help: RESUME_HELP,
  async run(args) {
    const { values, positionals } = parseArguments(args, STORE_OPTIONS)
    const name = taskName('resume', positionals)
    const url = storeUrlOption(values)
    return withStore(url, { table: tableOption(values) }, async (store) => {
      let ended: Awaited<ReturnType<typeof endPause>>
      try {
        ended = await endPause(store.inspector, name)
      } catch (error) {
        if (!(error instanceof PauseRefused)) throw error
        const { record } = error
        throw new CliError(
          error.why === 'held-by-run'
            ? `lock ${JSON.stringify(name)} is ${describeHolder(record!)}: a run holds it, not a pause, so nothing was resumed; "shedlock unlock ${name}" force-releases a run's lock`
            : `lock ${JSON.stringify(name)} changed after it was read (${record?.held ? `it is now ${describeHolder(record)}` : 'it is free now'}); nothing was released. Run shedlock resume again to see it`,
        )
      }
      const { result, pause } = ended
      const line =
        result === 'resumed'
          ? `resumed ${name} (was paused by ${pause!.by}${pause!.reason ? `: ${pause!.reason}` : ''})`
          : `${name} is not paused; nothing to resume`
      process.stdout.write(
        `${values.json === true ? JSON.stringify({ name, result, pause: pauseJson(pause) }, null, 2) : line}\n`,
      )
      return EXIT_OK
    })
  },
}

/** A task's state in `status`, with its pause: `paused by alice (deploy) until …`, or `stale (max 1h), paused by …`. */
export function withPause(state: string, pause: TaskPause | undefined): string {
  if (!pause) return state
  return state === 'ok' ? describePause(pause) : `${state}, ${describePause(pause)}`
}

/**
 * takePause() in the command line's words: a run that still holds the lock, or a duration the
 * store cannot hold (`--for`), is a CliError or a UsageError.
 */
async function pauseOn(
  store: StoreAdmin,
  name: string,
  holder: string,
  forMs: number | undefined,
  waitMs: number,
): Promise<Awaited<ReturnType<typeof takePause>>> {
  const target = { inspector: store.inspector, provider: (lockedBy: string) => store.provider({ lockedBy }) }
  try {
    return await takePause(target, name, holder, forMs, waitMs)
  } catch (error) {
    if (error instanceof LockConfigurationError)
      throw new UsageError(error.message.replaceAll('lockAtMostFor', '--for'))
    if (!(error instanceof PauseRefused)) throw error
    if (error.why === 'held-by-run') throw heldByRun(name, error.record!, waitMs)
    throw new CliError(error.message)
  }
}

function heldByRun(name: string, record: LockRecord, waitedMs: number): CliError {
  const waited = waitedMs > 0 ? ` after waiting ${formatDuration(waitedMs)}` : ''
  const advice =
    waitedMs > 0
      ? 'try again later, or with a longer --wait'
      : 'pass --wait D to pause once the run ends (waiting at most D)'
  return new CliError(
    `lock ${JSON.stringify(name)} is ${describeHolder(record)}${waited}: a run holds it, and a pause never cuts one short; not paused: ${advice}`,
  )
}

/** `until 2030-01-01T00:00:00.000Z (by alice@ops: deploy)`. */
function pauseText(pause: TaskPause): string {
  const until = pause.until ? `until ${isoUtc(pause.until)}` : 'until an expiry the store does not reveal'
  return `${until} (by ${pause.by}${pause.reason ? `: ${pause.reason}` : ''})`
}
