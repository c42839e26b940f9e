import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLockingTaskExecutor } from 'shedlock'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cli } from '../../cli/support/cli.ts'
import { noDoubleRunInAnyAttempt } from '../../helpers/double-runs.ts'
import { exclusively } from '../support/exclusive.ts'
import { recordFigure, type SlotFigures } from '../support/figures.ts'
import { startOrSkip } from '../support/start.ts'
import { openNode, type StoreSpec } from '../support/store-clients.mjs'
import { postgresUnderTest, redisUnderTest, sqliteUnderTest, type StoreUnderTest } from '../support/stores.ts'
import { type WorkerMessage, WorkerProcess } from '../support/workers.ts'

// The proofs of docs/slots.md, on SQLite (a file the processes share), PostgreSQL and Redis
// (servers of the fault suite's own), with worker processes as nodes:
// - skew: three nodes whose clocks differ by -20 s, 0 and +20 s fire the same schedule, a slot a
//   second, 1 ms tasks, lockAtLeastFor 0. Without slots (the control) a slot runs on every node
//   that fires it; with slots, once.
// - missed slots: every node stops across five slots; two nodes restart together and catch up
//   by policy: skip runs none, once one, all five.
// - history and health: the run ledger of those runs, read back through the built CLI.
// Both proofs run at once, every configuration on its own lock name, so that the file takes
// about as long as the skew proof alone (its 60 slots plus the 40 s between its fastest and
// slowest clock).

// Lock names and ledger files are new for each attempt (CI retries a failed test once): a retry
// must not find the slot records, run ledger or proof ledger of the attempt before.
const attemptId = (): string => randomBytes(3).toString('hex')

/** The skew proof's nodes: how far each clock is off, and how late its timer fires after its clock reads a slot. */
const SKEWED = [
  { node: 'ahead20s', skewMs: 20_000, lateMs: 0 },
  { node: 'exact', skewMs: 0, lateMs: 333 },
  { node: 'behind20s', skewMs: -20_000, lateMs: 667 },
] as const
// The clocks are whole periods apart, so without the timers' lateness all three nodes would
// fire (different nominal slots) at the same instants and race for the task's lock: the control
// would show runs lost to that race as well as double runs. A third of a period apart, every
// fire meets a free lock, and what the control shows is the skew alone.
const SKEW_PERIOD_MS = 1_000
const SKEW_SLOTS = 60

/** The missed-slots proof: a schedule of eight slots; two nodes run the first three and stop, two restart after the other five. */
const MISSED_PERIOD_MS = 1_000
const MISSED_SCHEDULE_SLOTS = 8
const RUN_BEFORE_OUTAGE = 3
const FIRST = ['first-a', 'first-b'] as const
const RESTARTING = ['restart-c', 'restart-d'] as const
const POLICIES = ['skip', 'once', 'all'] as const
type Policy = (typeof POLICIES)[number]

const sqlite = await startOrSkip('sqlite', () => sqliteUnderTest())
const postgres = await startOrSkip('postgres', () => postgresUnderTest())
const redis = await startOrSkip('redis', () => redisUnderTest())

/** One store of the proofs: how nodes reach it (with the run ledger's table) and how the CLI does. */
interface ProofStore {
  readonly label: string
  readonly sut: StoreUnderTest
  readonly spec: StoreSpec
  /** `--url URL [--table T] [--runs-table R]`. */
  readonly cli: string[]
}

function proofStore(sut: StoreUnderTest): ProofStore {
  const sql = sut.store !== 'redis'
  const runsTable = sql ? `${sut.spec().table}_runs` : undefined
  return {
    label: sut.label,
    sut,
    spec: sut.spec(runsTable ? { runsTable } : {}),
    cli: [...sut.cliArgs(), ...(runsTable ? ['--runs-table', runsTable] : [])],
  }
}

/** One execution, as the task appended it to its node's proof ledger. */
interface Execution {
  node: string
  name: string
  slot: number
  start: number
  end: number
}

/** How one node's attempts of one configuration ended (worker.mjs). */
interface Tally {
  executed: number
  slotDone: number
  held: number
  closed: number
  heldSlots: number[]
  errors: { slot: number; error: unknown }[]
}

/** What a restarting node's catch-up of one configuration returned (worker.mjs). */
interface CatchUpReport {
  outcome?: string
  missed?: number[]
  ran?: number[]
  failed?: unknown[]
  error?: unknown
}

interface SkewConfiguration {
  store: ProofStore
  mode: 'plain' | 'slot'
  name: string
}

interface MissedConfiguration {
  store: ProofStore
  policy: Policy
  name: string
}

interface SkewOutcome {
  configurations: SkewConfiguration[]
  slots: number[]
  executions: Execution[]
  /** Per node, per configuration (in `configurations` order). */
  tallies: Record<string, Tally[]>
}

interface MissedOutcome {
  configurations: MissedConfiguration[]
  slots: number[]
  executions: Execution[]
  /** Per first-generation node, per configuration. */
  tallies: Record<string, Tally[]>
  /** Per restarting node, per configuration. */
  catchUps: Record<string, CatchUpReport[]>
}

const stores = [sqlite, postgres, redis].flatMap((sut) => (sut ? [proofStore(sut)] : []))
const skewConfigurations = (id: string): SkewConfiguration[] =>
  stores.flatMap((store) =>
    (['plain', 'slot'] as const).map((mode) => ({ store, mode, name: `skew-${mode}-${store.sut.store}-${id}` })),
  )
const missedConfigurations = (id: string): MissedConfiguration[] =>
  stores.flatMap((store) =>
    POLICIES.map((policy) => ({ store, policy, name: `missed-${policy}-${store.sut.store}-${id}` })),
  )

const dir = mkdtempSync(join(tmpdir(), 'shedlock-faults-slots-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function readExecutions(files: string[]): Execution[] {
  return files.flatMap((file) =>
    existsSync(file)
      ? readFileSync(file, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Execution)
      : [],
  )
}

async function reportsOf(workers: WorkerProcess[], timeoutMs: number): Promise<WorkerMessage[]> {
  const reports = await Promise.all(workers.map((w) => w.next('report', timeoutMs)))
  await Promise.all(workers.map((w) => w.exited))
  for (const [i, report] of reports.entries()) {
    const problems = report.problems as { unhandledRejections: unknown[]; uncaughtExceptions: unknown[] }
    expect(problems.unhandledRejections, `unhandled rejections in ${workers[i]!.label}`).toEqual([])
    expect(problems.uncaughtExceptions, `uncaught exceptions in ${workers[i]!.label}`).toEqual([])
  }
  return reports
}

/** Three skewed nodes fire every skew configuration on the same 60-slot schedule. */
async function runSkew(id: string): Promise<SkewOutcome> {
  const planned = skewConfigurations(id)
  const configurations = planned.map((c) => ({
    spec: c.store.spec,
    name: c.name,
    slot: c.mode === 'slot',
    runLedger: c.mode === 'slot',
  }))
  const ledgers = SKEWED.map(({ node }) => join(dir, `skew-${id}-${node}.jsonl`))
  const workers = SKEWED.map(({ node, skewMs, lateMs }, i) =>
    WorkerProcess.start({
      mode: 'slot-skew',
      node,
      skewMs,
      lateMs,
      periodMs: SKEW_PERIOD_MS,
      configurations,
      proofLedger: ledgers[i],
    }),
  )
  await Promise.all(workers.map((w) => w.next('ready', 60_000)))
  // The node 20 s ahead fires the first slot 20 s before it is due: a second from now.
  const first = Math.ceil((Date.now() + 1_000 + 20_000) / SKEW_PERIOD_MS) * SKEW_PERIOD_MS
  for (const w of workers) w.send({ first, count: SKEW_SLOTS })
  const lastFire = first + (SKEW_SLOTS - 1) * SKEW_PERIOD_MS + 20_000 + 667
  const reports = await reportsOf(workers, lastFire - Date.now() + 60_000)
  return {
    configurations: planned,
    slots: Array.from({ length: SKEW_SLOTS }, (_, k) => first + k * SKEW_PERIOD_MS),
    executions: readExecutions(ledgers),
    tallies: Object.fromEntries(SKEWED.map(({ node }, i) => [node, reports[i]!.tallies as Tally[]])),
  }
}

/**
 * Two nodes run the first three slots of an eight-slot schedule and stop; every node is down for
 * the next five. Two restarting nodes, started with the first ones so that their start-up takes
 * no part in the timing, catch up together at an instant agreed once the first ones are gone.
 */
async function runMissed(id: string): Promise<MissedOutcome> {
  const planned = missedConfigurations(id)
  const configurations = planned.map((c) => ({ spec: c.store.spec, name: c.name, policy: c.policy, runLedger: true }))
  const nodes = [
    ...FIRST.map((node) => ({ node, role: 'first' })),
    ...RESTARTING.map((node) => ({ node, role: 'restart' })),
  ]
  const ledgers = nodes.map(({ node }) => join(dir, `missed-${id}-${node}.jsonl`))
  const workers = nodes.map(({ node, role }, i) =>
    WorkerProcess.start({ mode: 'slot-missed', node, role, configurations, proofLedger: ledgers[i] }),
  )
  const [first, restarting] = [workers.slice(0, FIRST.length), workers.slice(FIRST.length)]
  await Promise.all(workers.map((w) => w.next('ready', 60_000)))
  const start = Math.ceil((Date.now() + 1_000) / MISSED_PERIOD_MS) * MISSED_PERIOD_MS
  const schedule = { first: start, periodMs: MISSED_PERIOD_MS, count: MISSED_SCHEDULE_SLOTS }
  for (const w of first) w.send({ schedule, fires: RUN_BEFORE_OUTAGE })
  const firstReports = await reportsOf(first, RUN_BEFORE_OUTAGE * MISSED_PERIOD_MS + 60_000)
  // Every node is down. The outage covers the schedule's last five slots: the restarting nodes
  // start after the last of them, together.
  const lastSlot = start + (MISSED_SCHEDULE_SLOTS - 1) * MISSED_PERIOD_MS
  const at = Math.max(lastSlot + MISSED_PERIOD_MS / 2, Date.now() + 300)
  for (const w of restarting) w.send({ schedule, at })
  const restartReports = await reportsOf(restarting, at - Date.now() + 60_000)
  return {
    configurations: planned,
    slots: Array.from({ length: MISSED_SCHEDULE_SLOTS }, (_, k) => start + k * MISSED_PERIOD_MS),
    executions: readExecutions(ledgers),
    tallies: Object.fromEntries(FIRST.map((node, i) => [node, firstReports[i]!.tallies as Tally[]])),
    catchUps: Object.fromEntries(RESTARTING.map((node, i) => [node, restartReports[i]!.results as CatchUpReport[]])),
  }
}

/** Runs per slot of `slots`, runs of other slots, runs per node, duplicates and missing slots, from the proof ledger of one lock name. */
function countRuns(executions: Execution[], name: string, slots: number[], nodes: readonly string[]) {
  const mine = executions.filter((e) => e.name === name)
  const perSlot = new Map(slots.map((slot) => [slot, 0]))
  let outside = 0
  for (const e of mine) {
    if (perSlot.has(e.slot)) perSlot.set(e.slot, perSlot.get(e.slot)! + 1)
    else outside++
  }
  const runsPerNode = Object.fromEntries(nodes.map((node) => [node, mine.filter((e) => e.node === node).length]))
  const duplicates = [...perSlot.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0)
  const missing = [...perSlot.values()].filter((n) => n === 0).length
  // Two executions of one name at once: the lock's own guarantee, whatever the mode.
  const byStart = [...mine].sort((a, b) => a.start - b.start)
  const overlaps = byStart.filter((e, i) => i > 0 && e.start < byStart[i - 1]!.end).length
  return { perSlot, outside, runsPerNode, duplicates, missing, overlaps, runs: mine }
}

const iso = (ms: number): string => new Date(ms).toISOString()

/** A run of the run ledger, as `shedlock history --json` prints it. */
interface HistoryRun {
  slot: string | null
  node: string
  outcome: string
  finishedAt: string | null
  error: { type: string; message: string } | null
}

let skew: SkewOutcome | undefined
let missed: MissedOutcome | undefined

describe.skipIf(stores.length < 3)(
  'slots: one run per scheduled slot, on sqlite, postgres and redis, with worker processes as nodes',
  () => {
    beforeAll(async () => {
      // The run ledger's table, as users create it; Redis needs none.
      const inits = await Promise.all(stores.map((store) => cli(['init', ...store.cli])))
      for (const [i, run] of inits.entries())
        assert.equal(run.code, 0, `shedlock init on ${stores[i]!.label}: ${run.stdout}${run.stderr}`)
    }, 60_000)

    it('the nodes run both proofs at once: three skewed nodes for 60 slots, and an outage of five slots', async () => {
      skew = undefined
      missed = undefined
      const id = attemptId()
      ;[skew, missed] = await exclusively('slot proofs', () => Promise.all([runSkew(id), runMissed(id)]))
    }, 300_000)

    for (const store of stores) {
      describe(store.label, () => {
        it('skew (-20 s, 0, +20 s; a slot a second; 1 ms tasks; lockAtLeastFor 0): without slots a slot runs on each node, with slots exactly once', () => {
          assert.ok(skew, 'the proof did not run')
          const nodes = SKEWED.map((s) => s.node)
          for (const mode of ['plain', 'slot'] as const) {
            const index = skew.configurations.findIndex((c) => c.store === store && c.mode === mode)
            const { name } = skew.configurations[index]!
            const counted = countRuns(skew.executions, name, skew.slots, nodes)
            const tallies = nodes.map((node) => skew!.tallies[node]![index]!)
            if (mode === 'slot') noDoubleRunInAnyAttempt('slot runs beyond one per slot', counted.duplicates)
            for (const [i, tally] of tallies.entries()) {
              expect(tally.errors, `${mode}: store errors on ${nodes[i]}`).toEqual([])
              expect(tally.executed + tally.slotDone + tally.held, `${mode}: attempts of ${nodes[i]}`).toBe(SKEW_SLOTS)
            }
            expect(counted.outside, `${mode}: runs of slots the schedule does not have`).toBe(0)
            expect(counted.overlaps, `${mode}: runs of one task at the same time`).toBe(0)
            if (mode === 'plain') {
              // The control: the skew is real, and the proof's ledger sees the double runs it causes.
              expect(counted.duplicates, 'plain mode: runs of a slot beyond its first').toBeGreaterThan(0)
            } else {
              expect(counted.duplicates, 'slot mode: runs of a slot beyond its first').toBe(0)
              expect(counted.missing, 'slot mode: slots that never ran').toBe(0)
              // Of each slot's three attempts, one claimed it (and ran it, or found the lock held); two found it done.
              expect(
                tallies.reduce((sum, t) => sum + t.slotDone, 0),
                'slot mode: attempts that found their slot done',
              ).toBe(2 * SKEW_SLOTS)
            }
            const figures: SlotFigures = {
              mode,
              slots: SKEW_SLOTS,
              runsPerNode: counted.runsPerNode,
              duplicates: counted.duplicates,
              missing: counted.missing,
            }
            recordFigure({
              store: store.label,
              group: 'slot-skew',
              faults: 2,
              slots: figures,
              note: `${mode === 'plain' ? 'plain (the control)' : 'slot'}: ${SKEW_SLOTS} slots, runs per node ${JSON.stringify(counted.runsPerNode)}, ${counted.duplicates} duplicates, ${counted.missing} missing`,
            })
          }
        })

        it('missed slots (every node down across 5 slots, two restarting together): skip runs none, once one, all five oldest first, each once', () => {
          assert.ok(missed, 'the proof did not run')
          const nodes = [...FIRST, ...RESTARTING]
          const before = missed.slots.slice(0, RUN_BEFORE_OUTAGE)
          const down = missed.slots.slice(RUN_BEFORE_OUTAGE)
          expect(down).toHaveLength(5)
          const counts = POLICIES.map((policy) => {
            const index = missed!.configurations.findIndex((c) => c.store === store && c.policy === policy)
            return {
              policy,
              index,
              counted: countRuns(missed!.executions, missed!.configurations[index]!.name, missed!.slots, nodes),
            }
          })
          noDoubleRunInAnyAttempt(
            'runs of a slot beyond its first',
            counts.reduce((sum, c) => sum + c.counted.duplicates, 0),
          )
          for (const { policy, index, counted } of counts) {
            for (const node of FIRST)
              expect(missed.tallies[node]![index]!.errors, `${policy}: store errors on ${node}`).toEqual([])
            const catchUps = RESTARTING.map((node) => missed!.catchUps[node]![index]!)
            for (const [i, c] of catchUps.entries()) {
              expect(c.error, `${policy}: catchUp() of ${RESTARTING[i]} rejected`).toBeUndefined()
              expect(c.failed, `${policy}: catch-up runs of ${RESTARTING[i]} that failed`).toEqual([])
            }
            // Before the outage, each slot ran once, on one of the first two nodes.
            for (const slot of before)
              expect(counted.perSlot.get(slot), `${policy}: runs of ${iso(slot)}, before the outage`).toBe(1)
            const expected = policy === 'skip' ? [] : policy === 'once' ? down.slice(-1) : down
            const ranDown = down.filter((slot) => counted.perSlot.get(slot)! > 0)
            expect(ranDown.map(iso), `${policy}: missed slots that ran`).toEqual(expected.map(iso))
            for (const slot of ranDown) expect(counted.perSlot.get(slot), `${policy}: runs of ${iso(slot)}`).toBe(1)
            expect(counted.outside, `${policy}: runs of slots the schedule does not have`).toBe(0)
            expect(counted.overlaps, `${policy}: runs of one task at the same time`).toBe(0)
            if (policy === 'skip') {
              for (const c of catchUps) expect(c.outcome).toBe('skipped')
            } else {
              // One restarting node catches up; the other finds the lock held, or nothing left.
              const ran = catchUps.filter((c) => c.outcome === 'ran')
              expect(
                ran,
                `${policy}: catch-ups that ran (${JSON.stringify(catchUps.map((c) => c.outcome))})`,
              ).toHaveLength(1)
              expect(ran[0]!.missed!.map(iso), `${policy}: the slots the catch-up found missed`).toEqual(down.map(iso))
              expect(ran[0]!.ran!.map(iso)).toEqual(expected.map(iso))
              for (const c of catchUps.filter((c) => c.outcome !== 'ran'))
                expect(['held', 'nothing-missed']).toContain(c.outcome)
              // Oldest first: the catching-up node ran them in slot order.
              const caughtUp = counted.runs.filter((e) => down.includes(e.slot)).sort((a, b) => a.start - b.start)
              expect(caughtUp.map((e) => iso(e.slot))).toEqual(expected.map(iso))
            }
            recordFigure({
              store: store.label,
              group: 'slot-missed',
              faults: 1,
              slots: {
                mode: policy,
                slots: down.length,
                runsPerNode: counted.runsPerNode,
                duplicates: counted.duplicates,
                missing: expected.filter((slot) => counted.perSlot.get(slot) === 0).length,
              },
              note: `${policy}: ${down.length} slots missed, ${ranDown.length} caught up; runs per node ${JSON.stringify(counted.runsPerNode)}; outcomes ${catchUps.map((c) => c.outcome).join(' and ')}`,
            })
          }
        })

        it('history: shedlock history NAME --json reads back every slot run of the proofs, per node and per slot, and the skipped slots of a once catch-up', async () => {
          assert.ok(skew && missed, 'the proofs did not run')
          const tasks: { name: string; expected: string[] }[] = []
          const line = (slot: number, node: string, outcome: string): string => `${iso(slot)} ${node} ${outcome}`
          const slotSkew = skew.configurations.findIndex((c) => c.store === store && c.mode === 'slot')
          const skewName = skew.configurations[slotSkew]!.name
          tasks.push({
            name: skewName,
            expected: [
              ...skew.executions.filter((e) => e.name === skewName).map((e) => line(e.slot, e.node, 'ok')),
              ...Object.entries(skew.tallies).flatMap(([node, tallies]) =>
                tallies[slotSkew]!.heldSlots.map((slot) => line(slot, node, 'skipped')),
              ),
            ],
          })
          for (const [index, c] of missed.configurations.entries()) {
            if (c.store !== store) continue
            const folded = Object.entries(missed.catchUps).flatMap(([node, reports]) => {
              const r = reports[index]!
              return c.policy === 'once' && r.outcome === 'ran'
                ? r.missed!.filter((slot) => !r.ran!.includes(slot)).map((slot) => line(slot, node, 'skipped'))
                : []
            })
            if (c.policy === 'once') expect(folded, 'the once catch-up folds four missed slots').toHaveLength(4)
            tasks.push({
              name: c.name,
              expected: [
                ...missed.executions.filter((e) => e.name === c.name).map((e) => line(e.slot, e.node, 'ok')),
                ...Object.entries(missed.tallies).flatMap(([node, tallies]) =>
                  tallies[index]!.heldSlots.map((slot) => line(slot, node, 'skipped')),
                ),
                ...folded,
              ],
            })
          }
          const runs = await Promise.all(
            tasks.map((task) => cli(['history', task.name, ...store.cli, '--limit', '1000', '--json'])),
          )
          let read = 0
          for (const [i, task] of tasks.entries()) {
            const run = runs[i]!
            assert.equal(run.code, 0, `shedlock history ${task.name}: ${run.stderr}`)
            const history = JSON.parse(run.stdout) as { task: string; runs: HistoryRun[] }
            expect(history.task).toBe(task.name)
            for (const r of history.runs) {
              expect(r.finishedAt, `an unfinished run of ${task.name}`).not.toBeNull()
              // A skipped slot says why: the run that held the lock, or the fold into a later one.
              if (r.outcome === 'skipped') expect(['LockHeld', 'Folded']).toContain(r.error?.type)
              else expect(r.error).toBeNull()
            }
            // The ledger names the node as the store's locked_by does: <lockedBy>:<pid>:<random>.
            const got = history.runs.map((r) => line(Date.parse(r.slot ?? ''), r.node.split(':')[0]!, r.outcome)).sort()
            expect(got, `the run ledger of ${task.name} against the proof's ledger`).toEqual([...task.expected].sort())
            read += got.length
          }
          recordFigure({
            store: store.label,
            group: 'slot-history',
            faults: 0,
            note: `shedlock history --json: ${read} runs of ${tasks.length} tasks, each equal to the proof's ledger per node and per slot`,
          })
        })

        it('health: shedlock status --stale NAME=AGE --json exits 1 for a task with only failures, 0 for one that just succeeded', async () => {
          const node = await openNode(store.spec, { runLedger: true, lockedBy: 'health' })
          try {
            const executor = createLockingTaskExecutor(node.provider, { runLedger: node.runLedger!, node: 'health' })
            const id = attemptId()
            const failing = `health-failing-${store.sut.store}-${id}`
            const succeeding = `health-ok-${store.sut.store}-${id}`
            for (let i = 0; i < 2; i++) {
              await expect(
                executor.executeWithLock(
                  () => {
                    throw new TypeError(`report ${i} failed`)
                  },
                  { name: failing, lockAtMostFor: '10s' },
                ),
              ).rejects.toThrow(TypeError)
            }
            await executor.executeWithLock(() => {}, { name: succeeding, lockAtMostFor: '10s' })
            const [stale, fresh] = await Promise.all([
              cli(['status', ...store.cli, '--stale', `${failing}=1h`, '--json']),
              cli(['status', ...store.cli, '--stale', `${succeeding}=1h`, '--json']),
            ])
            type Status = {
              tasks: {
                name: string
                state: string
                consecutiveFailures: number
                lastSuccess: unknown
                lastFailure: { error: { type: string; message: string } } | null
              }[]
            }
            expect(stale.code, `status --stale ${failing}=1h: ${stale.stderr}`).toBe(1)
            const failingTask = (JSON.parse(stale.stdout) as Status).tasks.find((t) => t.name === failing)
            expect(failingTask).toMatchObject({
              state: 'stale',
              consecutiveFailures: 2,
              lastSuccess: null,
              lastFailure: { error: { type: 'TypeError', message: 'report 1 failed' } },
            })
            expect(fresh.code, `status --stale ${succeeding}=1h: ${fresh.stderr}`).toBe(0)
            expect((JSON.parse(fresh.stdout) as Status).tasks.find((t) => t.name === succeeding)).toMatchObject({
              state: 'ok',
              consecutiveFailures: 0,
            })
          } finally {
            await node.close()
          }
        })
      })
    }
  },
)
