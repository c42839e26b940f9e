// Runs in a child process started with --expose-gc (see memory.ts): executeWithLock cycles on the
// in-memory provider, then prints one JSON line with the heap and the handles before and after.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { keepAliveLockProvider } from '../../src/core/keep-alive.ts'
import { createLockingTaskExecutor, type LockingTaskExecutorListener } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'

const gc = (globalThis as { gc?: () => void }).gc
if (!gc) throw new Error('memory-child needs node --expose-gc')
const cycles = Number(process.argv[2])
const variant = process.argv[3] ?? 'executor'
if (!Number.isSafeInteger(cycles) || cycles < 2) throw new Error(`memory-child: bad cycle count ${process.argv[2]}`)

// Every hook present, so that the listener paths run too.
const noop = (): void => {}
const listener: LockingTaskExecutorListener = {
  onLockAttempt: noop,
  onLockAcquired: noop,
  onLockNotAcquired: noop,
  onLockFailed: noop,
  onTaskStarted: noop,
  onTaskFinished: noop,
  onUnlocked: noop,
  onUnlockFailed: noop,
  onLockExtended: noop,
  onLockLost: noop,
}
const memory = inMemoryLockProvider()
// keep-alive arms a timer per lock (lockAtMostFor / 2): it must be cleared on release.
const executor = createLockingTaskExecutor(variant === 'keep-alive' ? keepAliveLockProvider(memory) : memory, {
  listener,
})
// 100 names in turn: the provider's map of records stays at 100 entries, so any growth is a leak.
const names = Array.from({ length: 100 }, (_, i) => `memory-${i}`)
const task = async (): Promise<number> => 1

async function run(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const outcome = await executor.executeWithLock(task, { name: names[i % names.length]!, lockAtMostFor: 60_000 })
    if (!outcome.executed) throw new Error(`memory-child: lock "${names[i % names.length]}" was held after its release`)
  }
}

async function settledHeap(): Promise<number> {
  // Let pending callbacks run, then collect twice (weak references and finalizers need a second pass).
  await nextTurn()
  gc!()
  gc!()
  return process.memoryUsage().heapUsed
}

function resources(): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const type of process.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1
  return counts
}

const processListeners = (): number =>
  process.eventNames().reduce((sum, event) => sum + process.listenerCount(event), 0)

await run(1000)
const resourcesBefore = resources()
const listenersBefore = processListeners()
const heapBefore = await settledHeap()
const start = process.hrtime.bigint()
await run(Math.floor(cycles / 2))
const heapMiddle = await settledHeap()
await run(cycles - Math.floor(cycles / 2))
const seconds = Number(process.hrtime.bigint() - start) / 1e9
const heapAfter = await settledHeap()
const resourcesAfter = resources()
process.stdout.write(
  `${JSON.stringify({
    variant,
    cycles,
    seconds,
    heapBefore,
    heapMiddle,
    heapAfter,
    resourcesBefore,
    resourcesAfter,
    processListenersLeft: processListeners() - listenersBefore,
  })}\n`,
)
