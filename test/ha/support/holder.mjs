// A holder of the topology suite, as a process of its own in a network namespace of its own, so
// that the test can cut it off the store (its link down) or freeze it (SIGSTOP) while it runs its
// task: `node holder.mjs '<job as JSON>'`. It uses the built package, as an application would,
// takes the lock once through executeWithLock() with a task that runs until its signal aborts,
// and reports on stdout, one JSON line each (support/scenario.ts, HolderReport):
// {"granted":{"at","until"}}, then {"ended":{"at","reason"}}; or {"skipped"} / {"error"}.
// The stdout pipe is not the network: reports still arrive while the namespace is cut off.
import { createLockingTaskExecutor } from 'shedlock'

const job = JSON.parse(process.argv[2] ?? '{}')
const say = (report) => process.stdout.write(`${JSON.stringify(report)}\n`)

async function provider() {
  if (job.store === 'etcd') {
    const { Etcd3 } = await import('etcd3')
    const { etcdLockProvider } = await import('shedlock/etcd')
    const client = new Etcd3({ hosts: job.hosts, dialTimeout: 1000 })
    return etcdLockProvider({ client, timeout: '2s' })
  }
  if (job.store === 'redis') {
    const { Redis } = await import('ioredis')
    const { redisLockProvider } = await import('shedlock/redis')
    const client = new Redis({
      sentinels: job.sentinels,
      name: job.master,
      maxRetriesPerRequest: 1,
      connectTimeout: 1000,
      sentinelRetryStrategy: () => 200,
      retryStrategy: () => 200,
    })
    client.on('error', () => {})
    return redisLockProvider({ client, timeout: '2s' })
  }
  throw new Error(`holder.mjs: unknown store ${job.store}`)
}

// The executor's watchdog timer is unref'd, as it should be in a library; an application's
// scheduler keeps its process alive. So does this, or a holder cut off from the store, with no
// live socket left, would exit with its task pending instead of seeing its signal abort.
const alive = setInterval(() => {}, 1_000)

try {
  const executor = createLockingTaskExecutor(await provider())
  const result = await executor.executeWithLock(
    ({ signal, configuration }) =>
      new Promise((resolve) => {
        say({ granted: { at: Date.now(), until: configuration.lockAtMostUntil.getTime() } })
        signal.addEventListener('abort', () => {
          say({ ended: { at: Date.now(), reason: signal.reason?.name ?? String(signal.reason) } })
          resolve()
        })
      }),
    { name: job.name, lockAtMostFor: job.lockAtMostFor, lockAtLeastFor: 0 },
  )
  if (!result.executed) say({ skipped: result.reason })
} catch (error) {
  say({ error: String(error) })
}
clearInterval(alive)
// Its clients would keep it alive, reconnecting to the cut-off store: the test reads nothing more.
process.exit(0)
