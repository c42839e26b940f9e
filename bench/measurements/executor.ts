import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { type CompareOptions, type Contender, compare } from '../harness.ts'
import type { ExecutorRow } from '../result.ts'
import { ratio } from '../stats.ts'

/**
 * Executor overhead: `executeWithLock(task, options)` against what it wraps, a configuration,
 * `provider.lock()`, the task and `unlock()`, on the in-memory provider (no I/O, so the
 * difference is the executor's own work: async context, abort signal and lock-lost timer,
 * listener dispatch). One caller.
 */
export async function measureExecutor(options: Omit<CompareOptions, 'concurrency'>): Promise<ExecutorRow> {
  const provider = inMemoryLockProvider()
  const executor = createLockingTaskExecutor(provider)
  const task = async (): Promise<number> => 1
  const bare: Contender = {
    label: 'lock() + task + unlock()',
    async operation() {
      const configuration = lockConfiguration({ name: 'executor-bare', lockAtMostFor: 60_000 })
      const lock = await provider.lock(configuration)
      if (!lock) throw new Error('lock "executor-bare" was held after its release')
      await task()
      await lock.unlock()
    },
  }
  const wrapped: Contender = {
    label: 'executeWithLock()',
    async operation() {
      const outcome = await executor.executeWithLock(task, { name: 'executor-wrapped', lockAtMostFor: 60_000 })
      if (!outcome.executed) throw new Error('lock "executor-wrapped" was held after its release')
    },
  }
  const { results, opsPerBlock } = await compare([bare, wrapped], { ...options, concurrency: 1, maxOps: 50_000 })
  const [b, e] = results as [(typeof results)[0], (typeof results)[0]]
  return {
    opsPerBlock,
    bare: b,
    executor: e,
    p50Ratio: ratio(e.latency.p50, b.latency.p50),
    p99Ratio: ratio(e.latency.p99, b.latency.p99),
    addedMeanUs: 1e6 / e.opsPerSecond - 1e6 / b.opsPerSecond,
    addedCpuUs: e.cpuPerOpUs - b.cpuPerOpUs,
  }
}
