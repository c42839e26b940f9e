import { createHash } from 'node:crypto'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import type { RedisCommands } from '../../src/providers/redis/commands.ts'
import { redisLockProvider } from '../../src/providers/redis/index.ts'
import type { LibraryCpuRow } from '../result.ts'
import { median } from '../stats.ts'

/** Process CPU time (user + system) so far, in microseconds. */
function cpuNow(): number {
  const { user, system } = process.cpuUsage()
  return user + system
}

/** Median CPU per operation (µs) of `operation` over `rounds` runs of `ops`, after one untimed run. */
export async function cpuPerOp(operation: () => Promise<void>, ops: number, rounds: number): Promise<number[]> {
  const samples: number[] = []
  for (let round = 0; round <= rounds; round++) {
    const before = cpuNow()
    for (let i = 0; i < ops; i++) await operation()
    if (round > 0) samples.push((cpuNow() - before) / ops)
  }
  return samples
}

/**
 * The library's own CPU per operation, with no I/O, so that neither the store nor the load of
 * the machine's network path blurs it: `executeWithLock()` against a bare lock + task + unlock
 * on the in-memory provider, and the Redis provider's acquire + release against the same two
 * commands, both on a `RedisCommands` port that answers at once from a Map. Sequential, one
 * caller; the median of `rounds` runs of `ops` operations per side, sides alternating.
 */
export async function measureLibraryCpu(ops: number, rounds: number): Promise<LibraryCpuRow[]> {
  const memory = inMemoryLockProvider()
  const executor = createLockingTaskExecutor(memory)
  const task = async (): Promise<number> => 1
  const bare = async (): Promise<void> => {
    const lock = await memory.lock(lockConfiguration({ name: 'cpu-bare', lockAtMostFor: 60_000 }))
    if (!lock) throw new Error('lock "cpu-bare" was held after its release')
    await task()
    await lock.unlock()
  }
  const wrapped = async (): Promise<void> => {
    const outcome = await executor.executeWithLock(task, { name: 'cpu-wrapped', lockAtMostFor: 60_000 })
    if (!outcome.executed) throw new Error('lock "cpu-wrapped" was held after its release')
  }

  const keys = new Map<string, string>()
  const port: RedisCommands = {
    client: 'in-process port',
    setIfAbsent: async (key, value) => {
      if (keys.has(key)) return false
      keys.set(key, value)
      return true
    },
    evalSha: async (_sha, key, args) => {
      if (keys.get(key) !== args[0]) return 0
      keys.delete(key)
      return 1
    },
    eval: async () => 0,
  }
  const redis = redisLockProvider({ client: port, environment: 'bench' })
  const sha = createHash('sha1').update('release').digest('hex')
  let n = 0
  const ours = async (): Promise<void> => {
    const lock = await redis.lock(lockConfiguration({ name: 'cpu', lockAtMostFor: 60_000 }))
    if (!lock) throw new Error('redis (in-process port): lock "cpu" was held after its release')
    await lock.unlock()
  }
  const raw = async (): Promise<void> => {
    const value = `bench:${++n}`
    if (!(await port.setIfAbsent('job-lock:bench:raw', value, 60_000)))
      throw new Error('raw lock was held after its release')
    await port.evalSha(sha, 'job-lock:bench:raw', [value])
  }

  const rows: LibraryCpuRow[] = []
  for (const [what, baselineLabel, oursOp, baselineOp] of [
    ['executeWithLock() (in memory)', 'lock() + task + unlock()', wrapped, bare],
    ['redis provider acquire + release (in-process port)', 'the same two commands on the port', ours, raw],
  ] as const) {
    const o: number[] = []
    const b: number[] = []
    for (let round = 0; round < rounds; round++) {
      // Alternating, so that a drift of the machine falls on both sides alike.
      if (round % 2 === 0) {
        o.push(...(await cpuPerOp(oursOp, ops, 1)))
        b.push(...(await cpuPerOp(baselineOp, ops, 1)))
      } else {
        b.push(...(await cpuPerOp(baselineOp, ops, 1)))
        o.push(...(await cpuPerOp(oursOp, ops, 1)))
      }
    }
    const oursUs = median(o)
    const baselineUs = median(b)
    rows.push({
      what,
      baseline: baselineLabel,
      ops,
      rounds,
      oursCpuPerOpUs: oursUs,
      baselineCpuPerOpUs: baselineUs,
      addedCpuUs: oursUs - baselineUs,
    })
  }
  return rows
}
