import { setTimeout as sleep } from 'node:timers/promises'
import { formatDuration } from '../core/duration.ts'
import { describePause, pauseOf } from '../core/pause.ts'
import type { RunRecord } from '../core/run-ledger.ts'
import { TRIGGER_TTL_MS, triggerHolder } from '../core/trigger.ts'
import { HolderRefused, type StoreAdmin } from '../support/store-admin.ts'
import { type TakenTrigger, takeTrigger, waitForPickUp, withdrawTrigger } from '../status/trigger-control.ts'
import { CliError, type Command, durationOption, EXIT_OK, parseArguments, UsageError } from './command.ts'
import { inert } from './inert.ts'
import { withStore } from './open-store.ts'
import { operator, tableOption, taskName } from './operator-options.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock trigger NAME [--by WHO] [--wait D] [--url URL] [--table NAME]
                        [--runs-table T] [--json]
       shedlock trigger [options] -- NAME   (a NAME that starts with -)

Runs task NAME once, now, on one of the replicas that run it: leaves a
trigger (the record NAME@trigger, held by "triggered by WHO" for 10 minutes)
that executors polling for triggers pick up within their poll. The run goes
through the task's lock: a run that holds it is never overlapped, and the
trigger waits for it to end. History records it as triggered by WHO.

Executors poll only when told to:
  createLockingTaskExecutor(provider, { triggers: { poll: '10s' } })
If none picks the trigger up within --wait, it is withdrawn (exit 1).
A trigger already pending stays as it is (exit 0): one run, not two. A
paused task is refused (exit 1): resume it first.

Options:
${URL_HELP}
  --runs-table T  the run history's table, to name the node that ran it
                 (default: shedlock_runs)
  --by WHO       who triggered it (default: USER@HOST of this shell)
  --wait D       how long to wait for a replica to pick it up (default:
                 30s); 0: do not wait, leave it pending (it lapses after 10m)
  --json         print JSON: { name, result, by, node, afterMs }, result
                 being picked-up, pending or already-triggered
  -h, --help     show this help

NATS, ZooKeeper and memcached cannot hold a trigger (their locks keep no
holder name).

Exit codes: 0 picked up, left pending (--wait 0) or already pending;
            1 no replica picked it up, the task is paused, the store cannot
            hold a trigger, or it failed; 2 usage error
`

/** `shedlock trigger`. */
export const triggerCommand: Command = {
  name: 'trigger',
  summary: 'run a task now, once, on one replica, through its lock',
  help: HELP,
  async run(args) {
    const { values, positionals } = parseArguments(args, {
      url: { type: 'string' },
      table: { type: 'string' },
      'runs-table': { type: 'string' },
      json: { type: 'boolean' },
      by: { type: 'string' },
      wait: { type: 'string' },
    })
    const name = taskName('trigger', positionals)
    const waitMs = values.wait === undefined ? 30_000 : durationOption('--wait', values.wait)
    const by = typeof values.by === 'string' ? values.by.trim() : operator()
    if (by === '') throw new UsageError('--by needs a name: who triggered the task')
    const runsTable = typeof values['runs-table'] === 'string' ? values['runs-table'] : undefined
    const url = storeUrlOption(values)
    return withStore(url, { table: tableOption(values), runsTable }, async (store) => {
      const taken = await triggerOn(store, name, by)
      const done = taken.result === 'triggered' ? await pickUp(store, name, taken, waitMs) : undefined
      const result = taken.result === 'already-triggered' ? taken.result : done ? 'picked-up' : 'pending'
      if (values.json === true) {
        const json = { name, result, by: taken.by, node: done?.node ?? null, afterMs: done?.afterMs ?? null }
        process.stdout.write(`${JSON.stringify(json, null, 2)}\n`)
      } else process.stdout.write(`${describe(name, taken, done)}\n`)
      return EXIT_OK
    })
  },
}

interface PickedUp {
  readonly afterMs: number
  /** The node of the run it started, where the run history has it already. */
  readonly node: string | undefined
}

async function triggerOn(store: StoreAdmin, name: string, by: string): Promise<TakenTrigger> {
  // A paused task would keep the trigger pending until it lapses: every replica finds it held.
  const pause = pauseOf(await store.inspector.get(name))
  if (pause)
    throw new CliError(
      `task ${JSON.stringify(name)} is ${describePause(pause)}: no replica runs it, a trigger included; not triggered: shedlock resume ${name} first`,
    )
  const target = { inspector: store.inspector, provider: (lockedBy: string) => store.provider({ lockedBy }) }
  try {
    return await takeTrigger(target, name, triggerHolder(by))
  } catch (error) {
    if (error instanceof HolderRefused)
      throw new CliError(
        `${error.kind} cannot hold a trigger: ${error.why}; run the task where it is scheduled instead`,
      )
    throw error
  }
}

/** Waits `waitMs` for a replica to pick the trigger up; withdraws it, and fails, when none does. */
async function pickUp(
  store: StoreAdmin,
  name: string,
  taken: TakenTrigger,
  waitMs: number,
): Promise<PickedUp | undefined> {
  if (waitMs === 0) return undefined
  const record = taken.record
  if (!record) throw new CliError(`the trigger of ${JSON.stringify(name)} was taken but could not be read back`)
  const startedAt = Date.now()
  let afterMs = await waitForPickUp(store, record, waitMs)
  // Released by us only if still pending: a pick-up at the last moment wins.
  if (afterMs === undefined && !(await withdrawTrigger(store, record))) afterMs = Date.now() - startedAt
  if (afterMs === undefined)
    throw new CliError(
      `no replica picked up the trigger of ${inert(name)} within ${formatDuration(waitMs)}: no executor polls for triggers (createLockingTaskExecutor(provider, { triggers: { poll: '10s' } })) or every replica is down; the trigger was withdrawn`,
    )
  return { afterMs, node: await runNode(store, name, taken.by, startedAt) }
}

/**
 * The node of the latest run of `name` triggered by `by` since `since`, where the store keeps a
 * history: read for up to 1.5 s, as a short run is written when it ends, a long one after the
 * executor's `recordRunningAfter` (1 s by default). `undefined` when it is not there by then.
 */
async function runNode(store: StoreAdmin, name: string, by: string, since: number): Promise<string | undefined> {
  const ledger = store.runLedger
  for (let reads = 0; ledger && reads < 6; reads++) {
    let latest: RunRecord | undefined
    try {
      ;[latest] = await ledger.history(name, { limit: 1 })
    } catch {
      return undefined // no history table: the pick-up is news enough
    }
    if (latest?.triggeredBy === by && latest.startedAt.getTime() >= since - 1_000) return latest.node
    await sleep(250)
  }
  return undefined
}

function describe(name: string, taken: TakenTrigger, done: PickedUp | undefined): string {
  const task = inert(name)
  if (taken.result === 'already-triggered')
    return `a trigger of ${task} by ${inert(taken.by)} is already pending; not triggered again`
  if (!done)
    return `triggered ${task}; not waiting: an executor polling for triggers runs it within its poll (the trigger lapses after ${formatDuration(TRIGGER_TTL_MS)})`
  const node = done.node === undefined ? '' : ` by ${inert(done.node)}`
  return `triggered ${task}; picked up${node} after ${(done.afterMs / 1000).toFixed(1)} s`
}
