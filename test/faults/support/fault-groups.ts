import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  type Clock,
  createLockingTaskExecutor,
  type Duration,
  type LockingTaskExecutorListener,
  LockLostError,
  LockProviderError,
  lockConfiguration,
  type SimpleLock,
  systemClock,
} from 'shedlock'
import { expect, it } from 'vitest'
import { noDoubleRunInAnyAttempt } from '../../helpers/double-runs.ts'
import { waitFor } from '../../helpers/processes.ts'
import { badLockNames } from './bad-input.ts'
import { exclusively } from './exclusive.ts'
import { recordFigure } from './figures.ts'
import { checkLedger, heapSlope, readLedgers } from './ledger.ts'
import type { StoreSpec } from './store-clients.mjs'
import type { StoreUnderTest } from './stores.ts'
import { type CutMode, TcpProxy } from './tcp-proxy.ts'
import { type WorkerMessage, type WorkerProblems, WorkerProcess } from './workers.ts'

/** The poll period of "another node" waiting for a lock: the suite's scheduler tick. */
export const TICK_MS = 100
/** How late a timer may fire on a loaded 2-core machine before we call it a fault. */
const TIMER_SLACK_MS = 250
const SKEW_MS = 30_000

const suffix = (): string => randomBytes(4).toString('hex')
const config = (name: string, lockAtMostFor: Duration, lockAtLeastFor: Duration = 0, clock: Clock = systemClock) =>
  lockConfiguration({ name, lockAtMostFor, lockAtLeastFor, createdAt: new Date(clock.now()) })

/** A getter, because the store starts at import (top-level await) and may be missing (skipped file). */
export type Sut = () => StoreUnderTest

/** Errors reported by a worker: none may be an unhandled rejection or an uncaught exception. */
function expectNoEscapes(problems: WorkerProblems, where: string): void {
  expect(problems.unhandledRejections, `unhandled rejections in ${where}`).toEqual([])
  expect(problems.uncaughtExceptions, `uncaught exceptions in ${where}`).toEqual([])
}

/**
 * 1. Holder killed: a worker process takes the lock and is SIGKILLed in the middle of its task.
 * Another node, polling every tick, must not get the lock before the dead holder's
 * `lockAtMostUntil` (less what the store documents as early expiry), and must get it at the first
 * tick after the store's own deadline (plus the store's documented late expiry).
 *
 * The store's deadline is the configuration's `lockAtMostUntil` only where the app clock decides
 * (the provider writes it). A database or store server counts `lockAtMostFor` from its own now
 * when the acquire reaches it: after the configuration's `createdAt`, by the acquire's latency
 * (the holder's first lock() also connects its pool and reads the table), which a loaded machine
 * stretches past a tick. Its deadline lies between `lockAtMostUntil` and the moment the holder's
 * task started plus `lockAtMostFor`.
 */
export function holderKilled(sut: Sut): void {
  it('holder killed (SIGKILL): no other node locks before lockAtMostFor ends, one does within a tick after', async () => {
    const s = sut()
    const lockAtMostFor = Math.max(3_000, s.facts.minLockMs)
    const name = `killed-${suffix()}`
    // Connected and warmed up before the holder starts, so that its polls measure the store, not
    // the setup of a new client.
    const provider = await s.node()
    await (await provider.lock(config(`warm-${suffix()}`, '30s')))?.unlock()
    const holder = WorkerProcess.start({ mode: 'hold', node: 'holder', spec: s.spec(), name, lockAtMostFor })
    const locked = await holder.next('locked', 30_000)
    await holder.kill('SIGKILL')
    const until = locked.lockAtMostUntil as number
    const latestDeadline =
      s.facts.expiry === 'app' ? until : Math.max(until, (locked.startedAt as number) + lockAtMostFor)
    expect(await s.isHeld(name), 'the killed holder left its lock in the store').toBe(true)

    const attempts: { sentAt: number; answeredAt: number; acquired: boolean }[] = []
    const deadline = latestDeadline + s.facts.lateMs + 15_000
    for (;;) {
      const sentAt = Date.now()
      const lock = await provider.lock(config(name, '30s'))
      attempts.push({ sentAt, answeredAt: Date.now(), acquired: lock !== undefined })
      if (lock) {
        await lock.unlock()
        break
      }
      if (sentAt > deadline) break
      await sleep(Math.max(0, TICK_MS - (Date.now() - sentAt)))
    }
    const acquired = attempts.find((a) => a.acquired)
    const refusedWhileHeld = attempts.filter((a) => !a.acquired && a.answeredAt < until - s.facts.earlyMs).length
    expect(refusedWhileHeld, "attempts refused while the dead holder's lock lasted").toBeGreaterThanOrEqual(5)
    assert.ok(acquired, `no node got the lock within ${deadline - until} ms after lockAtMostUntil`)
    expect(acquired.answeredAt, 'acquired before lockAtMostUntil (ms before it)').toBeGreaterThanOrEqual(
      until - s.facts.earlyMs,
    )
    const firstDue = attempts.find((a) => a.sentAt >= latestDeadline + s.facts.lateMs)
    if (firstDue) {
      expect(
        acquired.sentAt,
        "the first attempt after the store's deadline (+ its expiry lag) did not get the lock",
      ).toBeLessThanOrEqual(firstDue.sentAt)
    }
    const latency = (locked.startedAt as number) - (locked.createdAt as number)
    recordFigure({
      store: s.label,
      group: 'holder-killed',
      faults: 1,
      note: `lock free ${acquired.answeredAt - until} ms after the dead holder's lockAtMostUntil (tick ${TICK_MS} ms; its acquire took ${latency} ms), ${refusedWhileHeld} attempts refused before`,
    })
  }, 60_000)
}

/** Listener calls recorded with their time. */
interface Recorded {
  hook: keyof LockingTaskExecutorListener
  at: number
  name: string
  error?: unknown
}

function recordingListener(into: Recorded[]): LockingTaskExecutorListener {
  const on =
    (hook: keyof LockingTaskExecutorListener) =>
    (configuration: { name: string }, detail?: unknown): void => {
      into.push({
        hook,
        at: Date.now(),
        name: configuration.name,
        ...(detail instanceof Error ? { error: detail } : {}),
      })
    }
  return {
    onLockFailed: on('onLockFailed'),
    onUnlockFailed: on('onUnlockFailed'),
    onTaskStarted: on('onTaskStarted'),
    onLockAcquired: on('onLockAcquired'),
    onLockLost: on('onLockLost'),
    onUnlocked: on('onUnlocked'),
  }
}

/** How the store goes down and comes back: the server by default. */
export interface Outage {
  /** What the figure calls the fault. */
  what: string
  down(): Promise<void>
  up(): Promise<void>
  /** How the executor's node connects, e.g. a short SQLite busy timeout. */
  spec?: Partial<StoreSpec>
}

/**
 * 2. Store restart during a hold: a task holds a lock while the store crashes (hard stop of our
 * own server). While it is down no task runs: each attempt rejects with `LockProviderError`,
 * which the listener sees too (`onLockFailed`), and the held task's release failure reaches
 * `onUnlockFailed`. After the restart the same executor, over the same client, locks again.
 * Measures what the store kept: whether the lock held at the crash is still held.
 */
export function storeRestart(sut: Sut, outage?: (s: StoreUnderTest) => Outage): void {
  it('store restart during a hold: no task runs while down, LockProviderError to caller and listener, the same executor locks again after', async () => {
    const s = sut()
    const o: Outage = outage?.(s) ?? {
      what: 'server crash (hard stop) and restart',
      down: () => s.server!.stop(true),
      up: () => s.server!.start(),
    }
    const events: Recorded[] = []
    const executor = createLockingTaskExecutor(await s.node({ timeoutMs: 1_500, spec: o.spec }), {
      listener: recordingListener(events),
    })
    // Two tasks hold locks when the store goes down: one ends while it is down (its release
    // fails), the other runs on until the store is back (its lock shows what the store kept).
    const heldName = `restart-held-${suffix()}`
    const endsName = `restart-ends-${suffix()}`
    const lockAtMostFor = 60_000
    const releases = new Map<string, () => void>()
    const hold = (name: string) =>
      executor.executeWithLock(() => new Promise<void>((resolve) => releases.set(name, resolve)), {
        name,
        lockAtMostFor,
      })
    const held = hold(heldName)
    const ends = hold(endsName)
    await eventually(
      async () => events.filter((e) => e.hook === 'onTaskStarted').length === 2,
      15_000,
      'the held tasks to start',
    )
    const heldUntil = Date.now() + lockAtMostFor

    await o.down()
    const downAt = Date.now()
    const ran: number[] = []
    const failures: unknown[] = []
    let endsOutcome: Awaited<typeof ends>
    let upStart: number
    try {
      for (let i = 0; i < 3; i++) {
        const error = await executor
          .executeWithLock(
            () => {
              ran.push(Date.now())
            },
            { name: `while-down-${i}-${suffix()}`, lockAtMostFor: '10s' },
          )
          .then(
            () => undefined,
            (e: unknown) => e,
          )
        failures.push(error)
      }
      releases.get(endsName)!()
      endsOutcome = await ends
    } finally {
      // Whatever failed above, the store comes back for the tests after this one.
      upStart = Date.now()
      await o.up()
    }
    const upAt = Date.now()
    // Before any other check, so that a retry sees what this attempt found (test/helpers/double-runs.ts).
    noDoubleRunInAnyAttempt('tasks that ran while the store was down', ran.length)

    for (const error of failures) {
      assert.ok(
        error instanceof LockProviderError,
        `expected LockProviderError while the store was down, got ${String(error)}`,
      )
      if (s.store !== 'mongodb') expect(error.provider).toBe(s.store)
      expect(error.message).toMatch(/could not acquire lock "while-down-/)
    }
    expect(ran, 'tasks that ran while the store was down').toEqual([])
    const lockFailed = events.filter((e) => e.hook === 'onLockFailed')
    expect(lockFailed).toHaveLength(3)
    for (const e of lockFailed) expect(e.error).toBeInstanceOf(LockProviderError)
    expect(endsOutcome.executed).toBe(true)
    const unlockFailed = events.filter((e) => e.hook === 'onUnlockFailed' && e.name === endsName)
    expect(
      unlockFailed,
      'the release failure of the task that ended while the store was down reached onUnlockFailed',
    ).toHaveLength(1)
    expect(unlockFailed[0]!.error).toBeInstanceOf(LockProviderError)

    // The same executor, no new client: it must lock again once the store is back.
    let attempts = 0
    let recoveredAt = 0
    const deadline = Date.now() + 45_000
    for (;;) {
      attempts++
      const outcome = await executor
        .executeWithLock(() => {}, { name: `after-restart-${suffix()}`, lockAtMostFor: '10s' })
        .catch((e: unknown) => e)
      if (typeof outcome === 'object' && outcome !== null && 'executed' in outcome && outcome.executed) {
        recoveredAt = Date.now()
        break
      }
      if (!(outcome instanceof LockProviderError))
        throw new Error(`after the restart, expected a run or a LockProviderError, got ${String(outcome)}`)
      if (Date.now() > deadline)
        throw new Error(`the executor did not lock again within 45 s of the restart: ${outcome.message}`)
      await sleep(250)
    }
    const startedWhileDown = events.filter((e) => e.hook === 'onTaskStarted' && e.at >= downAt && e.at < upStart)
    expect(startedWhileDown, 'tasks started while the store was down').toEqual([])

    // What the store kept across the outage: the lock of the task still running. (The test's
    // own reader may still be reconnecting.)
    const kept = await retrying('reading the held lock', () => s.isHeld(heldName))
    const remaining = await retrying('reading its remaining time', () => s.remainingMs(heldName))
    const expectedRemaining = heldUntil - Date.now()
    const other = await (await s.node()).lock(config(heldName, '10s'))
    expect(other === undefined, 'another node sees the held lock as held exactly when the store kept it').toBe(kept)
    await other?.unlock()
    releases.get(heldName)!()
    expect((await held).executed).toBe(true)
    if (s.facts.keepsLocksAcrossRestart !== undefined)
      expect(kept, 'kept the lock held at the crash').toBe(s.facts.keepsLocksAcrossRestart)
    const extended = remaining !== undefined && remaining > expectedRemaining + 2_000
    recordFigure({
      store: s.label,
      group: 'store-restart',
      faults: 1,
      note:
        `${o.what}: ${failures.length} attempts while down rejected (LockProviderError), 0 tasks ran; ` +
        `same executor locked again ${recoveredAt - upAt} ms after the store was back (attempt ${attempts}); ` +
        `lock held through the outage: ${kept ? 'kept' : 'forgotten'}` +
        (remaining === undefined
          ? ''
          : `, ${Math.round(remaining / 1000)} s left vs ${Math.round(expectedRemaining / 1000)} s expected${extended ? ' (the store restarted its TTL)' : ''}`),
    })
  }, 120_000)
}

/** How long a release may hang at most past `lockAtMostUntil` (the executor's grace) before it is reported. */
const RELEASE_GRACE_MS = 5_000

/**
 * 3. Network cut: a worker runs a task through our TCP proxy, and the proxy cuts the network in
 * the middle of it. Nothing may escape as an unhandled rejection or uncaught exception, the
 * release failure reaches `onUnlockFailed`, and `executeWithLock()` settles: a dead network
 * never leaves a task's lock call pending for ever.
 * - With keep-alive (extensible stores, by default): the cut comes after one extension went
 *   through; the next one fails, and the task's signal fires (with `LockLostError`) no later than
 *   the last `lockAtMostUntil` the store granted, even when the store never answers.
 * - Without (`keepAlive: false`, and stores that cannot extend): the task ends during the cut
 *   and its release fails or gets no answer.
 */
export function networkCut(sut: Sut, mode: CutMode, options: { keepAlive?: boolean } = {}): void {
  const what =
    options.keepAlive === false
      ? `network cut (${mode}) as a plain lock's task ends: the release failure is reported, executeWithLock settles, nothing unhandled`
      : `network cut (${mode}) mid-task: keep-alive fails, the signal fires in time, the unlock failure is reported, nothing unhandled`
  it(what, async () => {
    const s = sut()
    const proxy = await TcpProxy.start(s.server!.port)
    try {
      const keepAlive = options.keepAlive ?? s.facts.extensible
      const lockAtMostFor = Math.max(4_000, s.facts.minLockMs * 2)
      const worker = WorkerProcess.start({
        mode: 'cut',
        node: s.label,
        spec: s.spec({ port: proxy.port }),
        // Operation timeouts well under lockAtMostFor / 2, as with the defaults (5 s against at
        // least 30 s); the SQL clients have none, as pools have by default.
        nodeOptions: { timeoutMs: 1_000 },
        keepAlive,
        name: `cut-${mode}-${suffix()}`,
        lockAtMostFor,
        maxTaskMs: keepAlive ? 20_000 : 1_500,
      })
      const started = await worker.next('started', 30_000)
      let lastUntil = started.lockAtMostUntil as number
      if (keepAlive) {
        const extended = await worker.next('event', lockAtMostFor + 10_000, (m) => m.event === 'onLockExtended')
        lastUntil = extended.lockAtMostUntil as number
      } else {
        await sleep(300)
      }
      const cutAt = Date.now()
      proxy.cut(mode)
      const ended = await worker.next('task-ended', 40_000)
      const finished = await worker.next('finished', lockAtMostFor + RELEASE_GRACE_MS + 20_000)
      const report = await worker.next('report', 20_000)
      await worker.exited
      const events = worker.messages.filter((m) => m.type === 'event')
      const hooks = events.map((e) => e.event)

      expectNoEscapes(report.problems as WorkerProblems, `the worker (${mode} cut)`)
      expect(finished.outcome, 'the task ran; the failed release is reported, not thrown').toEqual({ executed: true })
      // The release starts when the task ends (after lockAtMostUntil, for a hung extension) and gets the grace from there.
      const releaseBound = Math.max(lastUntil, ended.at as number) + RELEASE_GRACE_MS + 1_000
      expect(finished.at as number, 'executeWithLock settled this long after its bound (ms)').toBeLessThanOrEqual(
        releaseBound,
      )
      const unlockFailed = events.find((e) => e.event === 'onUnlockFailed') as WorkerMessage | undefined
      assert.ok(unlockFailed, `no onUnlockFailed after the cut; listener calls: ${hooks.join(', ')}`)
      expect((unlockFailed.error as { name: string }).name).toBe('LockProviderError')
      let note = `unlock failure reported ${Number(unlockFailed.at) - cutAt} ms after the cut`
      if (keepAlive) {
        const abortedAt = ended.abortedAt as number | undefined
        assert.ok(
          abortedAt !== undefined,
          `the task's signal never fired after the ${mode} cut; listener calls: ${hooks.join(', ')}`,
        )
        expect((ended.reason as { name: string }).name).toBe('LockLostError')
        expect(hooks).toContain('onLockLost')
        expect(
          abortedAt - lastUntil,
          'signal fired after the lockAtMostUntil the store had granted (ms late)',
        ).toBeLessThanOrEqual(TIMER_SLACK_MS)
        note = `keep-alive: signal fired ${abortedAt - cutAt} ms after the cut, ${lastUntil - abortedAt} ms before lockAtMostUntil; ${note}`
      } else {
        note = `plain lock: ${note}`
      }
      recordFigure({ store: s.label, group: 'network-cut', faults: 1, note: `${mode}: ${note}` })
    } finally {
      await proxy.close()
    }
  }, 90_000)
}

/**
 * 4. Clock skew: node S's clock (its executor's and its provider's) runs 30 s ahead of node H's.
 * Where the database or the store's server decides expiry, S never runs a task H holds nor a
 * tick H just ran. Where each node's clock decides (app time), the README's stated risk shows,
 * and the stated mitigations hold: `lockAtLeastFor` longer than the skew stops the re-run tick,
 * `lockAtMostFor` longer than the skew plus the task stops the concurrent run.
 */
export function clockSkew(sut: Sut): void {
  it('clock skew (one node 30 s ahead): no double run where the store keeps time; with app time the risk shows and lockAtLeastFor/lockAtMostFor mitigate it', async () => {
    const s = sut()
    const ahead: Clock = { now: () => Date.now() + SKEW_MS }
    // Unleased: the mitigations checked here are lockAtMostFor's and lockAtLeastFor's. With a lease
    // (30 s by default), app time needs the lease above the skew too (docs/slots.md, Leases).
    const honest = createLockingTaskExecutor(await s.node(), { lease: false })
    const skewed = createLockingTaskExecutor(await s.node({ clock: ahead }), { clock: ahead, lease: false })
    const appTime = s.facts.expiry === 'app'

    // H runs `task`; resolves once H's task has started (or H is done, if it never started).
    const honestFirst = (name: string, task: () => Promise<unknown>, lockAtMostFor: number, lockAtLeastFor = 0) => {
      let started!: () => void
      const running = new Promise<void>((resolve) => (started = resolve))
      const done = honest.executeWithLock(
        () => {
          started()
          return task()
        },
        { name, lockAtMostFor, lockAtLeastFor },
      )
      return {
        done,
        running: Promise.race([
          running,
          done.then(
            () => undefined,
            () => undefined,
          ),
        ]),
      }
    }

    // (a) S fires while H's task runs, H's lock having 10 s left: less than the skew.
    const overlap = async (lockAtMostFor: number): Promise<boolean> => {
      const name = `skew-running-${suffix()}`
      let sRan = false
      const { done: h, running } = honestFirst(name, () => sleep(1_500), lockAtMostFor)
      try {
        await running
        await sleep(300)
        await skewed.executeWithLock(
          async () => {
            sRan = true
          },
          { name, lockAtMostFor },
        )
      } finally {
        expect((await h).executed).toBe(true)
      }
      return sRan
    }
    const concurrent = await overlap(10_000)
    const concurrentMitigated = await overlap(40_000)

    // (b) Both nodes fire every tick, S 20 ms after H's task started; the task takes 30 ms. A tick's
    // runs are those that started within lockAtLeastFor of its first: a store slowed past that (a
    // CI machine's fsync) lets S's late attempt in lawfully, and that is no double run.
    const ticks = async (count: number, lockAtLeastFor: number, lockAtMostFor: number): Promise<number[]> => {
      const name = `skew-ticks-${suffix()}`
      const starts: number[][] = []
      for (let tick = 0; tick < count; tick++) {
        starts[tick] = []
        const task = async () => {
          starts[tick]!.push(Date.now())
          await sleep(30)
        }
        const { done: h, running } = honestFirst(name, task, lockAtMostFor, lockAtLeastFor)
        try {
          await running
          await sleep(20)
          await skewed.executeWithLock(task, { name, lockAtMostFor, lockAtLeastFor })
        } finally {
          await h
        }
        await sleep(350)
      }
      // With app time every run of a tick counts: the skewed node takes the lock over at once,
      // the stated risk, however slow the store (the window would drop a run a slow store delayed).
      return starts.map((at) => (appTime ? at.length : at.filter((t) => t - at[0]! < lockAtLeastFor).length))
    }
    const shortAtLeast = await ticks(4, 150, 10_000)
    const longAtLeast = await ticks(3, SKEW_MS + 1_000, SKEW_MS + 10_000)

    // Unmitigated app time shows the stated risk on purpose; anything else is a double run.
    const doubleRuns =
      (appTime ? 0 : Number(concurrent) + Math.max(0, ...shortAtLeast.map((n) => n - 1))) +
      Number(concurrentMitigated) +
      Math.max(0, ...longAtLeast.map((n) => n - 1))
    noDoubleRunInAnyAttempt('double runs under a skewed clock', doubleRuns)
    if (appTime) {
      expect(
        concurrent,
        'app time: the node 30 s ahead ran the task while its holder still ran (the stated risk)',
      ).toBe(true)
      expect(Math.max(...shortAtLeast), 'app time: the first tick ran twice (the stated risk)').toBe(2)
    } else {
      expect(concurrent, `${s.facts.expiry} time: the skewed node ran a task that was still held`).toBe(false)
      expect(Math.max(...shortAtLeast), `${s.facts.expiry} time: runs per tick`).toBeLessThanOrEqual(1)
    }
    expect(concurrentMitigated, 'lockAtMostFor longer than skew + task: no concurrent run').toBe(false)
    expect(Math.max(...longAtLeast), 'lockAtLeastFor longer than the skew: no tick ran twice').toBeLessThanOrEqual(1)
    expect(longAtLeast[0], 'the first tick ran once').toBe(1)
    recordFigure({
      store: s.label,
      group: 'clock-skew',
      faults: 3,
      note: appTime
        ? `app clock: a node 30 s ahead ran a held task concurrently and re-ran a tick (runs per tick ${shortAtLeast.join('/')}); lockAtMostFor 40 s and lockAtLeastFor 31 s prevented both`
        : `${s.facts.expiry} clock: a node 30 s ahead never ran a held task or re-ran a tick (runs per tick ${shortAtLeast.join('/')})`,
    })
  }, 60_000)
}

/**
 * 5. A task outlives `lockAtMostFor` without keep-alive: its signal fires at `lockAtMostUntil`;
 * another node takes the lock; the first task's late release leaves the new holder's lock as it is.
 */
export function taskOutlivesLock(sut: Sut): void {
  it("task outlives lockAtMostFor: the signal fires at lockAtMostUntil, and the late unlock leaves the next holder's lock alone", async () => {
    const s = sut()
    const lockAtMostFor = Math.max(2_000, s.facts.minLockMs)
    const name = `outlives-${suffix()}`
    const events: Recorded[] = []
    const a = createLockingTaskExecutor(await s.node(), { listener: recordingListener(events) })
    const b = await s.node()
    const c = await s.node()
    let bLock: SimpleLock | undefined
    let bAcquiredAt = 0
    let bRecord: string | undefined
    let abortedAt: number | undefined
    let abortReason: unknown
    let until = 0

    const outcome = a.executeWithLock(
      async ({ signal, configuration }) => {
        until = configuration.lockAtMostUntil.getTime()
        signal.addEventListener('abort', () => {
          abortedAt = Date.now()
          abortReason = signal.reason
        })
        // Ignores the signal on purpose: runs past lockAtMostUntil until another node holds the
        // lock (a store that expires early may let it in sooner), then a bit more.
        const cap = Date.now() + lockAtMostFor + s.facts.lateMs + 10_000
        while ((!bLock || Date.now() < until + 300) && Date.now() < cap) await sleep(20)
        await sleep(100)
      },
      { name, lockAtMostFor },
    )
    await sleep(Math.max(0, lockAtMostFor - s.facts.earlyMs - 500))
    for (
      const deadline = Date.now() + lockAtMostFor + s.facts.lateMs + 10_000;
      !bLock && Date.now() < deadline;
      await sleep(50)
    ) {
      bLock = await b.lock(config(name, '30s'))
      if (bLock) {
        bAcquiredAt = Date.now()
        bRecord = await s.record(name)
      }
    }
    const aOutcome = await outcome
    // A's release ran after B took the lock. Before any other check, so that a retry sees what
    // this attempt found (test/helpers/double-runs.ts): B's record as it is now, and whether a
    // third node can take the lock B holds.
    const recordAfterLateUnlock = bLock ? await s.record(name) : undefined
    const third = bLock ? await c.lock(config(name, '30s')) : undefined
    noDoubleRunInAnyAttempt('locks taken while another node held one', third === undefined ? 0 : 1)
    expect(aOutcome.executed).toBe(true)
    assert.ok(bLock, 'no other node got the lock after lockAtMostFor')
    assert.ok(abortedAt !== undefined, "the task's signal never fired")
    expect(abortReason).toBeInstanceOf(LockLostError)
    expect(abortedAt, 'signal fired before lockAtMostUntil').toBeGreaterThanOrEqual(until)
    expect(abortedAt - until, 'signal fired late (ms)').toBeLessThanOrEqual(TIMER_SLACK_MS)
    expect(events.some((e) => e.hook === 'onLockLost')).toBe(true)
    expect(bAcquiredAt, 'the next node got the lock before lockAtMostUntil').toBeGreaterThanOrEqual(
      until - s.facts.earlyMs,
    )

    // B's record must be exactly as B wrote it.
    expect(recordAfterLateUnlock, "the late unlock changed the next holder's record").toBe(bRecord)
    expect(await s.isHeld(name)).toBe(true)
    expect(third, 'a third node got the lock the late unlock should have left alone').toBeUndefined()
    await bLock.unlock()
    recordFigure({
      store: s.label,
      group: 'outlives',
      faults: 1,
      note: `signal ${abortedAt - until} ms after lockAtMostUntil; next holder in ${bAcquiredAt - until} ms; its lock survived the late unlock`,
    })
  }, 60_000)
}

/** Soak length in seconds after the warm-up: short in CI, longer with SHEDLOCK_SOAK_SECONDS. */
export const SOAK_SECONDS = Number(process.env.SHEDLOCK_SOAK_SECONDS ?? 20)
/**
 * Seconds of the same load before the measured part, whose executions the ledger checks too but
 * whose heap does not count: the AWS SDK and etcd3 clients grow for 10-20 s (a CI run measured
 * 72 KB/s on DynamoDB between 10 and 20 s, and 17 KB/s between 30 and 60 s).
 */
const SOAK_WARMUP_SECONDS = 15
const SOAK_TOTAL_SECONDS = SOAK_WARMUP_SECONDS + SOAK_SECONDS
const SOAK_PROCESSES = 8
const SOAK_NAMES = 20
const SOAK_PERIOD_MS = 100
/**
 * Heap growth (bytes/s, after the warm-up or in the second half of the run, whichever is later,
 * after full collections) that counts as a leak:
 * 320 bytes kept per fire of a process. Drivers warm up for 20-30 s (etcd3's gRPC channel grows
 * to about 12 MB and stays there), which a short CI soak cannot tell from a slow leak; the
 * limit sits above that and below what a leak of one small object per fire costs. Long soaks
 * (SHEDLOCK_SOAK_SECONDS) measure far below it.
 */
const HEAP_SLOPE_LIMIT = 64 * 1024

/**
 * 6. Soak: 8 processes fire each of 20 lock names every 100 ms for SOAK_WARMUP_SECONDS and then
 * SOAK_SECONDS. Every execution
 * writes its start and end to its process's ledger; the checker proves that no two executions
 * of one name overlapped, that the executions spread over every process, that nothing escaped
 * as an unhandled rejection, and that no process's heap kept growing.
 */
export function soak(sut: Sut): void {
  it(
    `soak: ${SOAK_PROCESSES} processes x ${SOAK_NAMES} names x ${1000 / SOAK_PERIOD_MS}/s for ${SOAK_SECONDS} s after a ${SOAK_WARMUP_SECONDS} s warm-up: no overlap, spread over nodes, flat heaps`,
    () =>
      exclusively(`${sut().label} soak`, async () => {
        const s = sut()
        const dir = mkdtempSync(join(tmpdir(), 'shedlock-faults-soak-'))
        const workers: WorkerProcess[] = []
        try {
          const names = Array.from({ length: SOAK_NAMES }, (_, i) => `soak-${suffix()}-${i}`)
          const ledgers: Record<string, string> = {}
          for (let i = 0; i < SOAK_PROCESSES; i++) {
            const node = `n${i}`
            ledgers[node] = join(dir, `${node}.ledger`)
            workers.push(
              WorkerProcess.start({
                mode: 'soak',
                node,
                spec: s.spec({ poolSize: 5 }),
                names,
                seconds: SOAK_TOTAL_SECONDS,
                periodMs: SOAK_PERIOD_MS,
                ledger: ledgers[node],
              }),
            )
          }
          await Promise.all(workers.map((w) => w.next('ready', 60_000)))
          const startAt = Date.now() + 1_000
          for (const w of workers) w.send({ startAt })
          const reports = await Promise.all(workers.map((w) => w.next('report', SOAK_TOTAL_SECONDS * 1000 + 90_000)))
          await Promise.all(workers.map((w) => w.exited))

          const { executions, malformed } = readLedgers(ledgers)
          const check = checkLedger(executions, malformed)
          // Before any other check, so that a retry sees what this attempt found (test/helpers/double-runs.ts).
          noDoubleRunInAnyAttempt('overlapping executions', check.overlaps.length)
          const counts = reports.map(
            (r) => r.counts as { fires: number; busy: number; executed: number; notAcquired: number; errors: number },
          )
          const total = (key: keyof (typeof counts)[number]) => counts.reduce((sum, c) => sum + c[key], 0)
          const steadyFrom = startAt + Math.max(SOAK_WARMUP_SECONDS, SOAK_TOTAL_SECONDS / 2) * 1000
          const slopes = reports.map((r) => heapSlope(r.heap as { at: number; heapUsed: number }[], steadyFrom))
          const errors = reports.flatMap((r) => Object.entries(r.errors as Record<string, number>))
          for (const [i, r] of reports.entries()) expectNoEscapes(r.problems as WorkerProblems, `soak worker n${i}`)

          const perNode = Object.values(check.perNode)
          const planned = SOAK_PROCESSES * SOAK_NAMES * SOAK_TOTAL_SECONDS * (1000 / SOAK_PERIOD_MS)
          const summary =
            `${check.executions} executions checked, ${check.overlaps.length} overlaps; fires ${total('fires')}/${planned} planned ` +
            `(${total('busy')} skipped while the node's previous attempt was pending), ${total('notAcquired')} not acquired, ${total('errors')} errors; ` +
            `executions per node ${Math.min(...perNode)}-${Math.max(...perNode)}; heap growth per process ${Math.round(Math.max(...slopes) / 1024)} KB/s at most`
          recordFigure({
            store: s.label,
            group: 'soak',
            faults: 0,
            executions: check.executions,
            overlaps: check.overlaps.length,
            note: summary,
          })

          expect(check.overlaps.slice(0, 5), `overlapping executions (${summary})`).toEqual([])
          expect(check.unfinished, 'executions without an end').toBe(0)
          expect(check.malformed, 'malformed ledger lines').toBe(0)
          expect(check.executions, 'executions recorded vs executions the workers counted').toBe(total('executed'))
          expect(check.executions).toBeGreaterThan(SOAK_NAMES * SOAK_TOTAL_SECONDS)
          expect(Object.keys(check.perNode).sort(), 'nodes that ran tasks').toEqual(Object.keys(ledgers).sort())
          expect(Math.min(...perNode), 'executions of the least used node').toBeGreaterThanOrEqual(
            check.executions / SOAK_PROCESSES / 10,
          )
          expect(Object.keys(check.perName)).toHaveLength(SOAK_NAMES)
          expect(
            total('errors') / total('fires'),
            `share of failed attempts (${errors.map(([m, n]) => `${n}x ${m}`).join('; ')})`,
          ).toBeLessThan(0.005)
          for (const [i, slope] of slopes.entries())
            expect(slope, `heap growth of n${i} in bytes/s`).toBeLessThan(HEAP_SLOPE_LIMIT)
        } finally {
          await Promise.all(workers.map((w) => w.kill()))
          rmSync(dir, { recursive: true, force: true })
        }
      }),
    // Room to wait for the other file's exclusive part: the slot proofs take about 100 s.
    SOAK_TOTAL_SECONDS * 1000 + 300_000,
  )
}

/**
 * Calls `read` until it resolves, every 250 ms for up to 20 s, giving each call 3 s: the test's
 * own reader may still be reconnecting after a restart, and a client can hang on a connection
 * it opened while the server was starting (node-zookeeper-client), so a call that never answers
 * is abandoned and made again. The last failure is rethrown as an Error that names it, so the
 * log shows it even when a driver rejects with something vitest cannot print.
 */
async function retrying<T>(what: string, read: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 20_000
  for (;;) {
    try {
      let timer: NodeJS.Timeout | undefined
      const hung = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer within 3 s')), 3_000)
      })
      try {
        return await Promise.race([read(), hung])
      } finally {
        clearTimeout(timer)
      }
    } catch (error) {
      if (Date.now() > deadline) {
        const name = (error as { name?: unknown } | null)?.name
        throw new Error(
          `${what} failed for 20 s after the restart; last: ${String(name ?? '')} ${error instanceof Error ? error.message : String(error)}`,
        )
      }
      await sleep(250)
    }
  }
}

/** Polls `check` every 50 ms until it holds, or fails after `ms`. */
export async function eventually(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  if (!(await waitFor(check, ms))) assert.fail(`timed out after ${ms} ms waiting for ${what}`)
}

/** Which of the fault groups apply to a store; see {@link storeFaults}. */
export interface StoreFaultOptions {
  /** Whether the provider can extend: only then do the network cuts run under keep-alive. @default true */
  extensible?: boolean
  /** Whether clients reach the store over TCP, so that the proxy can cut them off. @default true */
  network?: boolean
  /** How the store goes down and comes back; a crash and restart of its server by default. */
  outage?: (s: StoreUnderTest) => Outage
}

/**
 * Registers, for one store, every fault group that applies to it, in the README's order: holder
 * killed, store restart, network cuts (reset and silent; with keep-alive where the provider can
 * extend, and as a plain lock), clock skew, a task outliving its lock, the soak, hostile names.
 */
export function storeFaults(sut: Sut, { extensible = true, network = true, outage }: StoreFaultOptions = {}): void {
  holderKilled(sut)
  storeRestart(sut, outage)
  if (network) {
    networkCut(sut, 'reset', { keepAlive: extensible })
    networkCut(sut, 'blackhole', { keepAlive: extensible })
    if (extensible) networkCut(sut, 'blackhole', { keepAlive: false })
  }
  clockSkew(sut)
  taskOutlivesLock(sut)
  soak(sut)
  badLockNames(sut)
}
