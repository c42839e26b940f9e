// One replica of the at-least-once proof (at-least-once.test.ts), as a process of its own:
// `node at-least-once-replica.mjs '<job as JSON>'`. It does what the README's first example does
// with the built package: a leased executor with a run ledger, catchUp({ policy: 'all' }) at
// start, and a slot run at every fire time of a shared schedule. Plain JavaScript: Node 20
// cannot load TypeScript.
//
// The task writes the truth the test counts: one line per start, appended (synchronously, so a
// SIGKILL right after cannot lose it) to the proof's starts file, then `START <slot> <ms>` on
// stdout, which tells the test which replica is inside its task, and for how long.

import { appendFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { createLockingTaskExecutor } from 'shedlock'
import { openNode } from '../support/store-clients.mjs'

const job = JSON.parse(process.argv[2] ?? '{}')
const say = (line) => process.stdout.write(`${line}\n`)

/** How long the task of `slot` takes: 300–700 ms, and every seventh slot 1.3 s, longer than a period. */
function taskMs(slot, periodMs) {
  const k = Math.round(slot / periodMs)
  return k % 7 === 3 ? 1_300 : 300 + ((k * 7919) % 401)
}

const node = await openNode(job.spec, { runLedger: true, lockedBy: job.node })
const executor = createLockingTaskExecutor(node.provider, {
  runLedger: node.runLedger,
  lease: job.lease,
  node: job.node,
  // Every run's start written when it starts: a run killed in its first second (the default
  // recordRunningAfter) would otherwise leave no trace in the ledger to read abandoned.
  recordRunningAfter: 0,
})
const lock = { name: job.name, lockAtMostFor: job.lockAtMostFor }

const task = async ({ slot }) => {
  const at = slot.getTime()
  const ms = taskMs(at, job.periodMs)
  appendFileSync(job.startsFile, `${JSON.stringify({ node: job.node, slot: at, start: Date.now() })}\n`)
  say(`START ${at} ${ms}`)
  await sleep(ms)
  say(`END ${at}`)
}

// The schedule's fire times: a whole period each, from `first`, `count` of them.
const schedule = (first) => ({
  last: first + (job.count - 1) * job.periodMs,
  fireTimes: (from, to) => {
    const out = []
    const start = Math.max(first, Math.ceil(from.getTime() / job.periodMs) * job.periodMs)
    for (let t = start; t <= Math.min(to.getTime(), first + (job.count - 1) * job.periodMs); t += job.periodMs)
      out.push(new Date(t))
    return out
  },
})

// Kept up until the test kills it: the owed waiters' timers are unref'd, and a pool's idle
// clients close, so nothing else would keep a replica that owes slots alive.
setInterval(() => {}, 60_000)
process.on('unhandledRejection', (reason) => say(`PROBLEM unhandledRejection ${String(reason)}`))

say('UP')
const first = job.first ?? (await new Promise((resolve) => process.once('message', (m) => resolve(m.first))))
const { last, fireTimes } = schedule(first)
say('READY')

if (job.catchUp) {
  executor.catchUp(task, lock, { policy: 'all', within: '5m', fireTimes }).then(
    (r) => say(`CATCHUP ${r.outcome} missed=${r.missed.length} ran=${r.ran.length} notRun=${r.notRun.length}`),
    (error) => say(`PROBLEM catchUp ${String(error)}`),
  )
}

for (let slot = Math.max(first, Math.ceil(Date.now() / job.periodMs) * job.periodMs); slot <= last; ) {
  await sleep(Math.max(0, slot - Date.now()))
  const at = slot
  executor.executeWithLock(task, { ...lock, slot: new Date(at) }).then(
    (outcome) => say(`OUTCOME ${at} ${outcome.executed ? 'executed' : outcome.reason}`),
    (error) => say(`PROBLEM slot ${at} ${String(error)}`),
  )
  slot += job.periodMs
}
