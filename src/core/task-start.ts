import { performance } from 'node:perf_hooks'
import type { LockExecution } from './diagnostics.ts'
import { callHook, type Emit, type LockingTaskExecutorListener } from './executor-events.ts'
import type { LockedTask, TaskContext, TaskResult } from './task.ts'

/**
 * Runs a locked task, reporting `onTaskStarted` and `onTaskFinished` (with its duration), through
 * the listener's `aroundTask` hook when it has one. Every run of an executor starts its task here.
 */
export async function runTask<T>(
  listener: LockingTaskExecutorListener | undefined,
  emit: Emit,
  task: LockedTask<T>,
  context: TaskContext,
  execution: LockExecution,
): Promise<TaskResult<T>> {
  const { configuration } = context
  emit('onTaskStarted', execution, configuration)
  const start = performance.now()
  try {
    const result = await startTask(listener, task, context, execution)
    emit('onTaskFinished', execution, configuration, { durationMs: performance.now() - start, failed: false })
    return { executed: true, result }
  } catch (error) {
    emit('onTaskFinished', execution, configuration, { durationMs: performance.now() - start, failed: true, error })
    throw error
  }
}

// Runs the task, through the listener's aroundTask hook when it has one. Whatever the hook does,
// the task starts exactly once, and its own result or error is what counts.
function startTask<T>(
  listener: LockingTaskExecutorListener | undefined,
  task: LockedTask<T>,
  context: TaskContext,
  execution: LockExecution,
): T | Promise<T> {
  const around = listener?.aroundTask
  if (typeof around !== 'function') return task(context)
  let result: { value: T | Promise<T> } | { error: unknown } | undefined
  const start = (): void => {
    if (result) return
    try {
      result = { value: task(context) }
    } catch (error) {
      result = { error }
    }
  }
  callHook(listener, 'aroundTask', [context.configuration, start, execution])
  if (!result) start()
  if ('error' in result!) throw result.error
  return result!.value
}
