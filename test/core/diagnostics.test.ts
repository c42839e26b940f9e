import assert from 'node:assert/strict'
import { channel, subscribe, unsubscribe } from 'node:diagnostics_channel'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { diagnosticsChannels, type LockEventMessage, type LockEventName } from '../../src/core/diagnostics.ts'
import { LockCannotBeExtendedError, LockLostError, LockProviderError } from '../../src/core/errors.ts'
import { type LockConfigurationOptions, lockConfiguration } from '../../src/core/lock-configuration.ts'
import { extendActiveLock } from '../../src/core/lock-context.ts'
import type { ExtensibleLock, LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { deferred, manualClock, fakeHandle } from '../helpers/fakes.ts'
import { startNode } from '../helpers/processes.ts'

interface Received {
  event: LockEventName
  message: LockEventMessage
}

const subscriptions: Array<[string, (message: unknown) => void]> = []

/** Subscribes to every shedlock channel; returns what arrives, in order. */
function record(): Received[] {
  const received: Received[] = []
  for (const [event, name] of Object.entries(diagnosticsChannels) as Array<[LockEventName, string]>) {
    const onMessage = (message: unknown) => received.push({ event, message: message as LockEventMessage })
    subscribe(name, onMessage)
    subscriptions.push([name, onMessage])
  }
  return received
}

afterEach(() => {
  for (const [name, onMessage] of subscriptions.splice(0)) unsubscribe(name, onMessage)
  vi.restoreAllMocks()
})

const named = <T extends LockProvider>(provider: T, name: string): T => Object.assign(provider, { name })
const opts = (name = 'job'): LockConfigurationOptions => ({ name, lockAtMostFor: '10m' })

describe('diagnosticsChannels', () => {
  it('names one channel per decision, under shedlock:', () => {
    expect(diagnosticsChannels).toEqual({
      lockAttempt: 'shedlock:lock:attempt',
      lockAcquired: 'shedlock:lock:acquired',
      lockNotAcquired: 'shedlock:lock:notAcquired',
      lockFailed: 'shedlock:lock:failed',
      taskStarted: 'shedlock:task:started',
      taskFinished: 'shedlock:task:finished',
      unlocked: 'shedlock:lock:unlocked',
      unlockFailed: 'shedlock:lock:unlockFailed',
      lockExtended: 'shedlock:lock:extended',
      lockLost: 'shedlock:lock:lost',
      slotClaimed: 'shedlock:slot:claimed',
      slotDone: 'shedlock:slot:done',
      slotSkipped: 'shedlock:slot:skipped',
      slotMissed: 'shedlock:slot:missed',
      slotCaughtUp: 'shedlock:slot:caughtUp',
      slotOwed: 'shedlock:slot:owed',
      runLedgerFailed: 'shedlock:ledger:failed',
      taskPaused: 'shedlock:task:paused',
    })
  })
})

describe('published events', () => {
  it('an executed task: attempt, acquired, started, finished, unlocked, all about one execution', async () => {
    const received = record()
    const provider = named(inMemoryLockProvider(), 'memory')
    let inside: LockEventName[] | undefined
    const result = await createLockingTaskExecutor(provider).executeWithLock(
      () => {
        inside = received.map((r) => r.event)
        return 'done'
      },
      { name: 'job', lockAtMostFor: '10m', lockAtLeastFor: '1s' },
    )
    expect(result).toEqual({ executed: true, result: 'done' })
    expect(inside).toEqual(['lockAttempt', 'lockAcquired', 'taskStarted'])
    expect(received.map((r) => r.event)).toEqual([
      'lockAttempt',
      'lockAcquired',
      'taskStarted',
      'taskFinished',
      'unlocked',
    ])

    const [attempt] = received
    const { execution, configuration } = attempt!.message
    expect(execution).toEqual({ id: expect.any(Number), provider: 'memory', reentrant: false })
    expect(Object.isFrozen(execution)).toBe(true)
    expect(configuration).toMatchObject({ name: 'job', lockAtMostFor: 600_000, lockAtLeastFor: 1_000 })
    expect(configuration.lockAtMostUntil.getTime() - configuration.createdAt.getTime()).toBe(600_000)
    for (const { message } of received) {
      expect(message.name).toBe('job')
      expect(message.execution).toBe(execution)
      expect(message.configuration).toBe(configuration)
    }
    const finished = received.find((r) => r.event === 'taskFinished')!.message
    expect(finished.failed).toBe(false)
    expect(finished.durationMs).toBeGreaterThanOrEqual(0)
    expect('error' in finished).toBe(false)
  })

  it('a held lock: attempt, notAcquired', async () => {
    const provider = inMemoryLockProvider()
    await provider.lock(lockConfiguration(opts()))
    const received = record()
    await expect(createLockingTaskExecutor(provider).executeWithLock(() => 1, opts())).resolves.toEqual({
      executed: false,
      reason: 'held',
    })
    expect(received.map((r) => r.event)).toEqual(['lockAttempt', 'lockNotAcquired'])
    expect(received[1]!.message.execution.provider).toBe('in-memory')
  })

  it('a store failure: attempt, failed with the LockProviderError the caller gets', async () => {
    const failure = new LockProviderError('connection refused', { provider: 'test', lockName: 'job' })
    const received = record()
    await expect(
      createLockingTaskExecutor({ lock: () => Promise.reject(failure) }).executeWithLock(() => 1, opts()),
    ).rejects.toBe(failure)
    expect(received.map((r) => r.event)).toEqual(['lockAttempt', 'lockFailed'])
    expect(received[1]!.message.error).toBe(failure)
  })

  it('a failing task: finished with failed, error and duration; then unlocked', async () => {
    const received = record()
    const boom = new Error('task failed')
    await expect(
      createLockingTaskExecutor(inMemoryLockProvider()).executeWithLock(() => {
        throw boom
      }, opts()),
    ).rejects.toBe(boom)
    expect(received.map((r) => r.event)).toEqual([
      'lockAttempt',
      'lockAcquired',
      'taskStarted',
      'taskFinished',
      'unlocked',
    ])
    expect(received[3]!.message).toMatchObject({ failed: true, error: boom, durationMs: expect.any(Number) })
  })

  it('a failing release: unlockFailed with the store error', async () => {
    const storeDown = new LockProviderError('store down')
    const provider: LockProvider = { lock: async () => fakeHandle({ unlock: async () => Promise.reject(storeDown) }) }
    vi.spyOn(process, 'emitWarning').mockImplementation(() => {})
    const received = record()
    await expect(createLockingTaskExecutor(provider).executeWithLock(() => 'ok', opts())).resolves.toEqual({
      executed: true,
      result: 'ok',
    })
    expect(received.map((r) => r.event)).toEqual([
      'lockAttempt',
      'lockAcquired',
      'taskStarted',
      'taskFinished',
      'unlockFailed',
    ])
    expect(received[4]!.message.error).toBe(storeDown)
  })

  it('extended carries the new deadlines; lost carries the LockLostError', async () => {
    const clock = manualClock(Date.UTC(2024, 0, 1))
    const provider = inMemoryLockProvider({ clock })
    const received = record()
    const outcome = await createLockingTaskExecutor(provider, { clock }).executeWithLock(async ({ signal }) => {
      clock.advance(1_000)
      await extendActiveLock('20m')
      // Past the extended deadline: the next extension finds the lock expired.
      clock.advance(21 * 60_000)
      await expect(extendActiveLock('20m')).rejects.toThrow(LockCannotBeExtendedError)
      return signal.reason as unknown
    }, opts())
    assert(outcome.executed)
    expect(received.map((r) => r.event)).toEqual([
      'lockAttempt',
      'lockAcquired',
      'taskStarted',
      'lockExtended',
      'lockLost',
      'taskFinished',
    ])
    const extended = received[3]!.message
    expect(extended.configuration.lockAtMostUntil.getTime()).toBe(Date.UTC(2024, 0, 1) + 1_000 + 20 * 60_000)
    expect(extended.configuration).not.toBe(received[0]!.message.configuration)
    const lost = received[4]!.message
    expect(lost.error).toBeInstanceOf(LockLostError)
    expect(lost.error).toBe(outcome.result)
    expect(new Set(received.map((r) => r.message.execution)).size).toBe(1)
  })

  it('a re-entrant call has task events of its own execution, marked reentrant, and no lock events', async () => {
    const received = record()
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    await executor.executeWithLock(() => executor.executeWithLock(() => 'inner', opts()), opts())
    expect(received.map((r) => r.event)).toEqual([
      'lockAttempt',
      'lockAcquired',
      'taskStarted',
      'taskStarted',
      'taskFinished',
      'taskFinished',
      'unlocked',
    ])
    const outer = received[0]!.message.execution
    const inner = received[3]!.message.execution
    expect(inner).not.toBe(outer)
    expect(inner.reentrant).toBe(true)
    expect(inner.id).toBeGreaterThan(outer.id)
    expect(received[4]!.message.execution).toBe(inner)
    expect(received[5]!.message.execution).toBe(outer)
  })

  it('concurrent calls on different names keep their events apart', async () => {
    const received = record()
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const releaseA = deferred()
    const releaseB = deferred()
    const a = executor.executeWithLock(() => releaseA.promise, opts('a'))
    const b = executor.executeWithLock(() => releaseB.promise, opts('b'))
    await vi.waitFor(() => expect(received.filter((r) => r.event === 'taskStarted')).toHaveLength(2))
    releaseB.resolve()
    await b
    releaseA.resolve()
    await a
    for (const name of ['a', 'b']) {
      const mine = received.filter((r) => r.message.name === name)
      expect(mine.map((r) => r.event)).toEqual([
        'lockAttempt',
        'lockAcquired',
        'taskStarted',
        'taskFinished',
        'unlocked',
      ])
      expect(new Set(mine.map((r) => r.message.execution)).size).toBe(1)
    }
    const ids = received.filter((r) => r.event === 'lockAttempt').map((r) => r.message.execution.id)
    expect(new Set(ids).size).toBe(2)
    // b finished first although it started second.
    expect(received.filter((r) => r.event === 'taskFinished').map((r) => r.message.name)).toEqual(['b', 'a'])
  })

  it('publishes nothing while a channel has no subscriber, and starts once one subscribes', async () => {
    const acquired = channel(diagnosticsChannels.lockAcquired)
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    expect(acquired.hasSubscribers).toBe(false)
    const publish = vi.spyOn(acquired, 'publish')
    await executor.executeWithLock(() => {}, opts())
    expect(publish).not.toHaveBeenCalled()
    // Subscribing swaps the channel's prototype to the publishing one, past the spy.
    publish.mockRestore()
    const seen: unknown[] = []
    const onMessage = (message: unknown) => seen.push(message)
    subscribe(diagnosticsChannels.lockAcquired, onMessage)
    try {
      await executor.executeWithLock(() => {}, opts('second'))
    } finally {
      unsubscribe(diagnosticsChannels.lockAcquired, onMessage)
    }
    expect(seen).toEqual([expect.objectContaining({ name: 'second' })])
  })

  it('an extension that finds the lock expired reports lost, never extended', async () => {
    const received = record()
    const handle: ExtensibleLock = fakeHandle({ unlock: async () => {}, extend: async () => undefined })
    await createLockingTaskExecutor({ lock: async () => handle }).executeWithLock(
      () => extendActiveLock('1m').catch(() => undefined),
      opts(),
    )
    expect(received.map((r) => r.event)).toEqual([
      'lockAttempt',
      'lockAcquired',
      'taskStarted',
      'lockLost',
      'taskFinished',
    ])
  })
})

// A throwing subscriber must be seen where Node reports it (an uncaught exception on the next
// tick), which would fail this test run; so it runs in a child process, on the built package.
const dist = (file: string) => new URL(`../../dist/${file}`, import.meta.url).href

function runChild(source: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const built = fileURLToPath(dist('core/locking-task-executor.js'))
  if (!existsSync(built)) throw new Error(`${built} is missing: run "npm run build" first`)
  return startNode(['--input-type=module', '-e', source]).done
}

describe('a subscriber that throws', () => {
  it('does not break the task: it runs, its result returns, the lock is released, other subscribers still get every event', async () => {
    const source = `
      import { subscribe } from 'node:diagnostics_channel'
      import { createLockingTaskExecutor } from ${JSON.stringify(dist('core/locking-task-executor.js'))}
      import { diagnosticsChannels } from ${JSON.stringify(dist('core/diagnostics.js'))}
      import { inMemoryLockProvider } from ${JSON.stringify(dist('providers/in-memory/index.js'))}
      const uncaught = []
      process.on('uncaughtException', (error) => uncaught.push(error.message))
      const seen = []
      for (const name of Object.values(diagnosticsChannels)) {
        subscribe(name, () => { throw new Error('subscriber failed on ' + name) })
        subscribe(name, () => seen.push(name))
      }
      const provider = inMemoryLockProvider()
      let ran = 0
      const result = await createLockingTaskExecutor(provider).executeWithLock(() => { ran++; return 'done' }, { name: 'job', lockAtMostFor: '10m' })
      const again = await createLockingTaskExecutor(provider).executeWithLock(() => 'again', { name: 'job', lockAtMostFor: '10m' })
      await new Promise((resolve) => setImmediate(resolve))
      console.log(JSON.stringify({ result, again, ran, seen, uncaught }))
    `
    const { code, stdout, stderr } = await runChild(source)
    expect(stderr).toBe('')
    expect(code).toBe(0)
    const out = JSON.parse(stdout) as {
      result: unknown
      again: unknown
      ran: number
      seen: string[]
      uncaught: string[]
    }
    expect(out.result).toEqual({ executed: true, result: 'done' })
    expect(out.ran).toBe(1)
    // Released: a second call takes the lock again.
    expect(out.again).toEqual({ executed: true, result: 'again' })
    const oneRun = [
      'shedlock:lock:attempt',
      'shedlock:lock:acquired',
      'shedlock:task:started',
      'shedlock:task:finished',
      'shedlock:lock:unlocked',
    ]
    expect(out.seen).toEqual([...oneRun, ...oneRun])
    // Node reports each subscriber error as an uncaught exception, after the publish returned.
    expect(out.uncaught).toEqual(out.seen.map((name) => `subscriber failed on ${name}`))
  })
})
