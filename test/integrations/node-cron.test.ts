import type { Duration } from '../../src/core/duration.ts'
import cron, { type RunCoordinator, type ScheduledTask, type TaskContext } from 'node-cron'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { LockConfigurationError, LockProviderError, NotLockedError } from '../../src/core/errors.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { assertLocked } from '../../src/core/lock-context.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import {
  lockingRunCoordinator,
  lockingTaskOptions,
  type NodeCronRunCoordinator,
} from '../../src/integrations/node-cron.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { manualClock, recordingListener } from '../helpers/fakes.ts'

const key = (second: number) => `report:2024-01-01T00:00:0${second}.000Z`
const failingProvider: LockProvider = {
  lock: async (configuration) => {
    throw new LockProviderError('connection refused', { provider: 'test', lockName: configuration.name })
  },
}

// The structural type must accept node-cron's own.
const asNodeCron = (c: NodeCronRunCoordinator): RunCoordinator => c
void asNodeCron

describe('lockingRunCoordinator', () => {
  it('takes the named lock in shouldRun and releases it in onComplete', async () => {
    const provider = inMemoryLockProvider()
    const coordinator = lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m' })
    await expect(coordinator.shouldRun(key(1), 30_000)).resolves.toBe(true)
    const held = provider.inspect('report')!
    expect(held.lockUntil.getTime()).toBeGreaterThan(Date.now() + 50_000)
    await coordinator.onComplete(key(1))
    expect(provider.inspect('report')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
  })

  it('uses one lock per task, named by the options: never parses the key', async () => {
    const provider = inMemoryLockProvider()
    const lock = vi.spyOn(provider, 'lock')
    const coordinator = lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m' })
    for (const k of ['a:b:c', 'report:2024-01-01T00:00:00.000Z', '']) {
      await expect(coordinator.shouldRun(k, 1)).resolves.toBe(true)
      await coordinator.onComplete(k)
    }
    expect(lock.mock.calls.map(([c]) => c.name)).toEqual(['report', 'report', 'report'])
  })

  it('says false while another node holds the lock', async () => {
    const provider = inMemoryLockProvider()
    await provider.lock(lockConfiguration({ name: 'report', lockAtMostFor: '1m' }))
    const coordinator = lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m' })
    await expect(coordinator.shouldRun(key(1), 30_000)).resolves.toBe(false)
    // onComplete is not called after false; if it were, it would do nothing.
    await coordinator.onComplete(key(1))
  })

  it('one node of two runs a fire; the next fire is free again once the run completed', async () => {
    const provider = inMemoryLockProvider()
    const nodeA = lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m' })
    const nodeB = lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m' })
    const [a, b] = await Promise.all([nodeA.shouldRun(key(1), 1), nodeB.shouldRun(key(1), 1)])
    expect([a, b].sort()).toEqual([false, true])
    await (a ? nodeA : nodeB).onComplete(key(1))
    await expect(nodeB.shouldRun(key(2), 1)).resolves.toBe(true)
    await nodeB.onComplete(key(2))
  })

  it('holds the lock until lockAtLeastFor has passed after a short run', async () => {
    const clock = manualClock()
    const provider = inMemoryLockProvider({ clock })
    const executor = createLockingTaskExecutor(provider, { clock })
    const nodeA = lockingRunCoordinator(executor, { name: 'report', lockAtMostFor: '10s', lockAtLeastFor: '800ms' })
    const nodeB = lockingRunCoordinator(executor, { name: 'report', lockAtMostFor: '10s', lockAtLeastFor: '800ms' })
    await expect(nodeA.shouldRun(key(1), 1)).resolves.toBe(true)
    clock.advance(100)
    await nodeA.onComplete(key(1))
    clock.advance(650)
    // A late node's fire of the same second, 750ms after it started: still locked.
    await expect(nodeB.shouldRun(key(1), 1)).resolves.toBe(false)
    clock.advance(50)
    await expect(nodeB.shouldRun(key(2), 1)).resolves.toBe(true)
    await nodeB.onComplete(key(2))
  })

  it('keeps the runs of different fire keys apart', async () => {
    const provider = inMemoryLockProvider()
    const coordinator = lockingRunCoordinator(provider, { name: 'report', lockAtMostFor: '1m' })
    await expect(coordinator.shouldRun(key(1), 1)).resolves.toBe(true)
    // An overlapping fire (node-cron without noOverlap): the lock is held by the running one.
    await expect(coordinator.shouldRun(key(2), 1)).resolves.toBe(false)
    // The same fire asked again while it runs.
    await expect(coordinator.shouldRun(key(1), 1)).resolves.toBe(false)
    await coordinator.onComplete(key(2))
    expect(provider.inspect('report')!.lockUntil.getTime()).toBeGreaterThan(Date.now())
    await coordinator.onComplete(key(1))
    expect(provider.inspect('report')!.lockUntil.getTime()).toBeLessThanOrEqual(Date.now())
  })

  it('fails closed: shouldRun rejects with the LockProviderError when the store fails', async () => {
    const coordinator = lockingRunCoordinator(failingProvider, { name: 'report', lockAtMostFor: '1m' })
    const error = await Promise.resolve(coordinator.shouldRun(key(1), 1)).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect((error as LockProviderError).lockName).toBe('report')
  })

  it("reports to an executor's listener, the run lasting from shouldRun to onComplete", async () => {
    const listener = recordingListener()
    const coordinator = lockingRunCoordinator(createLockingTaskExecutor(inMemoryLockProvider(), { listener }), {
      name: 'report',
      lockAtMostFor: '1m',
    })
    await coordinator.shouldRun(key(1), 1)
    expect(listener.log).toEqual(['onLockAttempt report', 'onLockAcquired report', 'onTaskStarted report'])
    await coordinator.onComplete(key(1))
    expect(listener.log).toEqual([
      'onLockAttempt report',
      'onLockAcquired report',
      'onTaskStarted report',
      'onTaskFinished report',
      'onUnlocked report',
    ])
  })

  it.each([
    [{ name: '', lockAtMostFor: '1m' }, /^lockingRunCoordinator\(\): Lock name "" is blank/],
    [{ lockAtMostFor: '1m' }, /^lockingRunCoordinator\(\): Lock name must be a string, got undefined/],
    [{ name: 'report' }, /^lockingRunCoordinator\(\): Lock "report": lockAtMostFor is required/],
    [
      { name: 'report', lockAtMostFor: '1m', lockAtLeastFor: '2m' },
      /^lockingRunCoordinator\(\): Lock "report": lockAtLeastFor \(2m\) is longer than lockAtMostFor \(1m\)/,
    ],
    [undefined, /^lockingRunCoordinator\(\): options are missing/],
  ])('rejects bad options at once: %j', (options, message) => {
    expect(() => lockingRunCoordinator(inMemoryLockProvider(), options as never)).toThrow(LockConfigurationError)
    expect(() => lockingRunCoordinator(inMemoryLockProvider(), options as never)).toThrow(message)
  })

  it('rejects a provider of the wrong kind at once', () => {
    expect(() => lockingRunCoordinator({} as never, { name: 'report', lockAtMostFor: '1m' })).toThrow(
      /^lockingRunCoordinator\(\) of lock "report": expected a LockProvider/,
    )
  })
})

describe('lockingTaskOptions', () => {
  it('fills in name, distributed, the coordinator and distributedLease = lockAtMostFor', () => {
    const options = lockingTaskOptions(inMemoryLockProvider(), {
      name: 'report',
      lockAtMostFor: '2m',
      lockAtLeastFor: '1s',
    })
    expect(options).toMatchObject({ name: 'report', distributed: true, distributedLease: 120_000 })
    expect(typeof options.runCoordinator.shouldRun).toBe('function')
    expect(typeof options.runCoordinator.onComplete).toBe('function')
  })

  it('rejects bad options at once', () => {
    expect(() =>
      lockingTaskOptions(inMemoryLockProvider(), { name: 'report', lockAtMostFor: 'x' as Duration }),
    ).toThrow(/^lockingTaskOptions\(\): Lock "report": lockAtMostFor is invalid/)
  })
})

describe('with node-cron itself (real time, about 2.5 s)', () => {
  const tasks: ScheduledTask[] = []
  afterEach(async () => {
    for (const task of tasks.splice(0)) await task.destroy()
  })

  it('two nodes over one store: a fire runs on one node, the other skips it as not-elected; a failing store skips with coordinator-error', async () => {
    const provider = inMemoryLockProvider()
    const runs: Array<{ node: string; second: number; locked: boolean }> = []
    const skipped: Array<{ node: string; second: number; reason: string | undefined }> = []
    for (const node of ['a', 'b']) {
      const task = cron.schedule(
        '* * * * * *',
        (context: TaskContext) => {
          let locked = true
          try {
            assertLocked()
          } catch (error) {
            expect(error).toBeInstanceOf(NotLockedError)
            locked = false
          }
          runs.push({ node, second: Math.floor(context.date.getTime() / 1000), locked })
        },
        // Two executors, as two processes would have; one in-memory store stands for the shared one.
        {
          ...lockingTaskOptions(createLockingTaskExecutor(provider), {
            name: 'report',
            lockAtMostFor: '10s',
            lockAtLeastFor: '500ms',
          }),
          noOverlap: true,
        },
      )
      task.on('execution:skipped', (context) => {
        skipped.push({ node, second: Math.floor(context.date.getTime() / 1000), reason: context.reason })
      })
      tasks.push(task)
    }
    const failing = cron.schedule('* * * * * *', () => runs.push({ node: 'failing', second: 0, locked: false }), {
      ...lockingTaskOptions(failingProvider, { name: 'failing', lockAtMostFor: '10s' }),
      logger: { info() {}, warn() {}, error() {}, debug() {} },
    })
    const coordinatorErrors: Array<string | undefined> = []
    failing.on('execution:skipped', (context) => {
      coordinatorErrors.push(context.reason)
    })
    tasks.push(failing)

    await sleep(2_600)
    // Under a loaded machine node-cron may report a late fire as missed instead of running it, so
    // the checks are on what did happen: no second ran twice, and the other node skipped it.
    expect(runs.length).toBeGreaterThanOrEqual(1)
    for (const run of runs) {
      expect(
        runs.filter((r) => r.second === run.second),
        `second ${run.second}`,
      ).toHaveLength(1)
      expect(
        skipped.filter((s) => s.second === run.second && s.node === run.node),
        `second ${run.second}`,
      ).toEqual([])
    }
    expect(skipped.length).toBeGreaterThanOrEqual(1)
    expect(new Set(skipped.map((s) => s.reason))).toEqual(new Set(['not-elected']))
    for (const skip of skipped)
      expect(
        runs.some((r) => r.second === skip.second),
        `second ${skip.second} was skipped by ${skip.node} but ran nowhere`,
      ).toBe(true)
    // node-cron runs the task outside the lock's async context: assertLocked() cannot see the lock.
    expect(runs.every((r) => !r.locked)).toBe(true)
    expect(runs.some((r) => r.node === 'failing')).toBe(false)
    expect(coordinatorErrors.length).toBeGreaterThanOrEqual(1)
    expect(new Set(coordinatorErrors)).toEqual(new Set(['coordinator-error']))
  })
})
