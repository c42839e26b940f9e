// One node of the fault suite, as a process of its own: `node worker.mjs '<job as JSON>'`, forked
// with an IPC channel by workers.ts. It uses the built package, as an application would, and
// reports over IPC. Every mode watches for unhandled rejections, uncaught exceptions and process
// warnings and reports them: none may escape shedlock, whatever the store does.
//
// Modes:
// - hold: takes a lock and never finishes its task; the test SIGKILLs it;
// - cut: runs one task under a (kept-alive) lock while the test cuts the network, and reports
//   the task's signal and the listener's calls;
// - soak: fires every lock name on a fixed period and writes each execution's start and end to
//   a ledger file;
// - secrets: provokes failures with password-bearing clients, with NODE_DEBUG=shedlock, and
//   reports every error text; the test scans those and this process's output for the password;
// - slot-skew: a proof scheduler on a skewed clock fires every configuration (a store and a lock
//   name, plain or slot mode) on a period grid, and each execution is appended to a proof ledger;
// - slot-missed: the same scheduler, stopped after a few slots ('first'), or a node restarting
//   after an outage that catches up at an agreed instant ('restart').

import { appendFileSync, createWriteStream } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { inspect } from 'node:util'
import { createLockingTaskExecutor, inMemoryLockProvider, keepAliveLockProvider, lockConfiguration } from 'shedlock'
import { openNode } from './store-clients.mjs'

const job = JSON.parse(process.argv[2] ?? '{}')
const problems = { unhandledRejections: [], uncaughtExceptions: [], warnings: [] }
process.on('unhandledRejection', (reason) => problems.unhandledRejections.push(describe(reason)))
process.on('uncaughtException', (error) => problems.uncaughtExceptions.push(describe(error)))
process.on('warning', (warning) => problems.warnings.push(`${warning.name}: ${warning.message}`))

const send = (message) => new Promise((resolve) => (process.send ? process.send(message, () => resolve()) : resolve()))

/** An error as plain data: class, message, provider and the messages of its causes. */
function describe(error) {
  if (!(error instanceof Error)) return { name: typeof error, message: String(error) }
  const causes = []
  for (let cause = error.cause, depth = 0; cause !== undefined && depth < 5; cause = cause?.cause, depth++) {
    causes.push(cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause))
  }
  return { name: error.name, message: error.message, provider: error.provider, lockName: error.lockName, causes }
}

/**
 * The proof scheduler of the slot proofs: fires `first`, `first + periodMs`, … (`count` fires)
 * when `clock` reads each of them, `lateMs` late, and calls `fire(slot)` with the nominal fire
 * time (epoch ms), however late the timer was. `fireTimes(from, to)` is its own enumeration of
 * those fire times, what catch-up asks a scheduler for.
 */
function proofSchedule({ first, periodMs, count }) {
  const slots = Array.from({ length: count }, (_, k) => first + k * periodMs)
  return {
    fireTimes: (from, to) =>
      slots.filter((slot) => slot >= from.getTime() && slot <= to.getTime()).map((slot) => new Date(slot)),
    async run(clock, lateMs, fire, fires = count) {
      for (const slot of slots.slice(0, fires)) {
        await sleep(Math.max(0, slot + lateMs - clock()))
        fire(slot)
      }
    },
  }
}

/**
 * One store node per store of the job's configurations (with a run ledger where a configuration
 * asks for one), warmed up, and an executor per configuration. `job.node` names the node in the
 * store (`lockedBy`) and in the run ledger.
 */
async function openConfigurations(configurations) {
  const nodes = new Map()
  const executors = []
  for (const c of configurations) {
    const key = JSON.stringify(c.spec)
    if (!nodes.has(key)) {
      const runLedger = configurations.some((o) => o.runLedger && JSON.stringify(o.spec) === key)
      const node = await openNode(c.spec, { lockedBy: job.node, runLedger })
      // Connected before the first fire: a slot's claim must measure the store, not a pool's start.
      await (await node.provider.lock(lockConfiguration({ name: `warm-${job.node}`, lockAtMostFor: '10s' })))?.unlock()
      await node.runLedger?.history(`warm-${job.node}`, { limit: 1 })
      nodes.set(key, node)
    }
    const node = nodes.get(key)
    executors.push(
      createLockingTaskExecutor(node.provider, {
        node: job.node,
        ...(c.runLedger ? { runLedger: node.runLedger } : {}),
      }),
    )
  }
  return {
    executors,
    close: () => Promise.race([Promise.all([...nodes.values()].map((node) => node.close())), sleep(3000)]),
  }
}

/** The task of the slot proofs: 1 ms of work, appended to this node's proof ledger (JSONL: node, name, slot, start, end). */
function proofTask(name, nominal) {
  return async ({ slot }) => {
    const start = Date.now()
    await sleep(1)
    const end = Date.now()
    appendFileSync(
      job.proofLedger,
      `${JSON.stringify({ node: job.node, name, slot: slot?.getTime() ?? nominal, start, end })}\n`,
    )
  }
}

/** How one node's attempts of one configuration ended. */
function newTally() {
  return { executed: 0, slotDone: 0, held: 0, closed: 0, heldSlots: [], errors: [] }
}

function count(tally, slot, outcome) {
  if (outcome.executed) tally.executed++
  else if (outcome.reason === 'slot-done') tally.slotDone++
  else if (outcome.reason === 'held') {
    tally.held++
    tally.heldSlots.push(slot)
  } else tally.closed++
}

const modes = {
  async hold() {
    const node = await openNode(job.spec, job.nodeOptions)
    const executor = createLockingTaskExecutor(node.provider)
    // The task never settles; this timer keeps the process alive until the test kills it.
    setInterval(() => {}, 1 << 30)
    const outcome = await executor.executeWithLock(
      async ({ configuration }) => {
        // startedAt: the store granted the lock before this instant, so it counted lockAtMostFor
        // from no later than it.
        await send({
          type: 'locked',
          createdAt: configuration.createdAt.getTime(),
          lockAtMostUntil: configuration.lockAtMostUntil.getTime(),
          startedAt: Date.now(),
        })
        await new Promise(() => {})
      },
      { name: job.name, lockAtMostFor: job.lockAtMostFor },
    )
    if (!outcome.executed) await send({ type: 'not-locked' })
  },

  async cut() {
    const node = await openNode(job.spec, job.nodeOptions)
    const provider = job.keepAlive ? keepAliveLockProvider(node.provider, { minLockAtMostFor: 1 }) : node.provider
    const event = (name) => (configuration, detail) =>
      void send({
        type: 'event',
        event: name,
        at: Date.now(),
        lockAtMostUntil: configuration.lockAtMostUntil.getTime(),
        ...(detail instanceof Error || (detail && typeof detail === 'object' && 'message' in detail)
          ? { error: describe(detail) }
          : {}),
      })
    const listener = {
      onLockAcquired: event('onLockAcquired'),
      onLockExtended: event('onLockExtended'),
      onLockLost: event('onLockLost'),
      onUnlocked: event('onUnlocked'),
      onUnlockFailed: event('onUnlockFailed'),
      onLockFailed: event('onLockFailed'),
    }
    const executor = createLockingTaskExecutor(provider, { listener })
    let outcome
    try {
      const result = await executor.executeWithLock(
        async ({ signal, configuration }) => {
          await send({
            type: 'started',
            createdAt: configuration.createdAt.getTime(),
            lockAtMostUntil: configuration.lockAtMostUntil.getTime(),
          })
          const abortedAt = await new Promise((resolve) => {
            const timer = setTimeout(() => resolve(undefined), job.maxTaskMs)
            const onAbort = () => {
              clearTimeout(timer)
              resolve(Date.now())
            }
            if (signal.aborted) onAbort()
            else signal.addEventListener('abort', onAbort, { once: true })
          })
          await send({
            type: 'task-ended',
            at: Date.now(),
            abortedAt,
            reason: signal.aborted ? describe(signal.reason) : undefined,
          })
          // Keep running a little after the abort, as a task finishing its current step would.
          await sleep(job.afterAbortMs ?? 200)
          return 'done'
        },
        { name: job.name, lockAtMostFor: job.lockAtMostFor },
      )
      outcome = { executed: result.executed }
    } catch (error) {
      outcome = { error: describe(error) }
    }
    await send({ type: 'finished', outcome, at: Date.now() })
    // Stray rejections of the dead connection surface a little later, if at all.
    await sleep(job.settleMs ?? 1500)
    await send({ type: 'report', problems })
    await Promise.race([node.close(), sleep(3000)])
    process.exit(0)
  },

  async soak() {
    const node = await openNode(job.spec, job.nodeOptions)
    const executor = createLockingTaskExecutor(node.provider)
    const ledger = createWriteStream(job.ledger)
    const counts = { fires: 0, busy: 0, executed: 0, notAcquired: 0, errors: 0 }
    const errorSamples = new Map()
    const heap = []
    const pending = new Map()
    let sequence = 0
    let running = true

    const task = async (name) => {
      const id = ++sequence
      // hrtime is CLOCK_MONOTONIC: one clock for every process of this machine, in nanoseconds.
      ledger.write(`${id} S ${process.hrtime.bigint()} ${name}\n`)
      // 1-4 ms of "work" with an await inside, so that executions of one name could overlap if the lock let them.
      await sleep(1 + Math.floor(Math.random() * 4))
      ledger.write(`${id} E ${process.hrtime.bigint()}\n`)
    }
    const fire = (name) => {
      counts.fires++
      // A scheduler with no-overlap semantics: a fire while this process's previous attempt
      // for the name is still pending is skipped (and counted).
      if (pending.has(name)) {
        counts.busy++
        return
      }
      const attempt = executor
        .executeWithLock(() => task(name), { name, lockAtMostFor: '10s' })
        .then(
          (outcome) => {
            if (outcome.executed) counts.executed++
            else counts.notAcquired++
          },
          (error) => {
            counts.errors++
            const key = `${error?.name}: ${error?.message}`.slice(0, 300)
            errorSamples.set(key, (errorSamples.get(key) ?? 0) + 1)
          },
        )
        .finally(() => pending.delete(name))
      pending.set(name, attempt)
    }

    await send({ type: 'ready' })
    const go = await new Promise((resolve) => process.once('message', resolve))
    const period = job.periodMs
    const until = go.startAt + job.seconds * 1000
    const timers = new Map()
    // Every process fires every name on the same period boundaries: maximal contention.
    const schedule = (name) => {
      if (!running) return
      const now = Date.now()
      const next = Math.max(go.startAt, (Math.floor(now / period) + 1) * period)
      if (next >= until) return
      timers.set(
        name,
        setTimeout(() => {
          fire(name)
          schedule(name)
        }, next - now),
      )
    }
    const sample = () => {
      globalThis.gc?.()
      heap.push({ at: Date.now(), heapUsed: process.memoryUsage().heapUsed })
    }
    await sleep(Math.max(0, go.startAt - Date.now()))
    sample()
    const sampler = setInterval(sample, job.heapEveryMs ?? 1000)
    for (const name of job.names) schedule(name)
    await sleep(Math.max(0, until - Date.now()))
    running = false
    for (const timer of timers.values()) clearTimeout(timer)
    await Promise.all(pending.values())
    clearInterval(sampler)
    sample()
    await new Promise((resolve) => ledger.end(resolve))
    await send({ type: 'report', counts, errors: Object.fromEntries(errorSamples), heap, problems })
    await Promise.race([node.close(), sleep(3000)])
    process.exit(0)
  },

  async 'slot-skew'() {
    const { executors, close } = await openConfigurations(job.configurations)
    const tallies = job.configurations.map(() => newTally())
    await send({ type: 'ready' })
    const go = await new Promise((resolve) => process.once('message', resolve))
    const schedule = proofSchedule({ first: go.first, periodMs: job.periodMs, count: go.count })
    // This node's clock: the system's, job.skewMs off. Only its scheduler reads it, so it fires
    // slot T at real time T - skewMs (+ lateMs), and passes the same nominal T as every node.
    const clock = () => Date.now() + job.skewMs
    const attempts = []
    await schedule.run(clock, job.lateMs, (slot) => {
      job.configurations.forEach((c, i) => {
        const request = {
          name: c.name,
          lockAtMostFor: '10s',
          lockAtLeastFor: 0,
          ...(c.slot ? { slot: new Date(slot) } : {}),
        }
        attempts.push(
          executors[i].executeWithLock(proofTask(c.name, slot), request).then(
            (outcome) => count(tallies[i], slot, outcome),
            (error) => tallies[i].errors.push({ slot, error: describe(error) }),
          ),
        )
      })
    })
    await Promise.all(attempts)
    await send({ type: 'report', tallies, problems })
    await close()
    process.exit(0)
  },

  async 'slot-missed'() {
    const { executors, close } = await openConfigurations(job.configurations)
    await send({ type: 'ready' })
    const go = await new Promise((resolve) => process.once('message', resolve))
    const schedule = proofSchedule(go.schedule)
    if (job.role === 'first') {
      // Runs the schedule's first fires as slot runs, then stops: the outage begins.
      const tallies = job.configurations.map(() => newTally())
      const attempts = []
      await schedule.run(
        Date.now,
        0,
        (slot) => {
          job.configurations.forEach((c, i) => {
            attempts.push(
              executors[i]
                .executeWithLock(proofTask(c.name, slot), { name: c.name, lockAtMostFor: '10s', slot: new Date(slot) })
                .then(
                  (outcome) => count(tallies[i], slot, outcome),
                  (error) => tallies[i].errors.push({ slot, error: describe(error) }),
                ),
            )
          })
        },
        go.fires,
      )
      await Promise.all(attempts)
      await send({ type: 'report', tallies, problems })
    } else {
      // A node starting after the outage: every configuration catches up at the agreed instant.
      await sleep(Math.max(0, go.at - Date.now()))
      const startedAt = Date.now()
      const results = await Promise.all(
        job.configurations.map((c, i) =>
          executors[i]
            .catchUp(
              proofTask(c.name, undefined),
              { name: c.name, lockAtMostFor: '10s' },
              { policy: c.policy, within: '1m', fireTimes: schedule.fireTimes },
            )
            .then(
              (result) => ({
                outcome: result.outcome,
                missed: result.missed.map((d) => d.getTime()),
                ran: result.ran.map((d) => d.getTime()),
                failed: result.failed.map((f) => ({ slot: f.slot.getTime(), error: describe(f.error) })),
              }),
              (error) => ({ error: describe(error) }),
            ),
        ),
      )
      await send({ type: 'report', startedAt, results, problems })
    }
    await close()
    process.exit(0)
  },

  async secrets() {
    // A canary: one lock in memory, so that the debug log has lines whatever the stores do.
    await createLockingTaskExecutor(inMemoryLockProvider()).executeWithLock(() => {}, {
      name: 'secrets-canary',
      lockAtMostFor: '5s',
    })
    // Each case: a node whose connection carries the password, and a lock attempt that fails.
    const texts = []
    for (const spec of job.specs) {
      let node
      try {
        node = await openNode(spec, { timeoutMs: 1500 })
        const outcome = await createLockingTaskExecutor(node.provider).executeWithLock(() => {}, {
          name: `secrets-${spec.store}`,
          lockAtMostFor: '5s',
        })
        texts.push({ spec: spec.store, outcome: outcome.executed ? 'executed' : 'not executed' })
      } catch (error) {
        texts.push({
          spec: spec.store,
          message: String(error),
          stack: error?.stack,
          inspected: inspect(error, { depth: 6 }),
        })
      } finally {
        await Promise.race([node?.close(), sleep(2000)])
      }
    }
    await sleep(500)
    await send({ type: 'report', texts, problems })
    process.exit(0)
  },
}

const mode = modes[job.mode]
if (!mode) {
  await send({ type: 'fatal', error: { name: 'Error', message: `unknown mode ${job.mode}` } })
  process.exit(2)
}
try {
  await mode()
} catch (error) {
  await send({ type: 'fatal', error: describe(error) })
  process.exit(1)
}
