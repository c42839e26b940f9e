import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { defineLock } from '../../src/core/define-lock.ts'
import type { LockExecution, LockEventMessage } from '../../src/core/diagnostics.ts'
import { diagnosticsChannels } from '../../src/core/diagnostics.ts'
import { NoActiveLockError } from '../../src/core/errors.ts'
import type { LockingTaskExecutorListener } from '../../src/core/executor-events.ts'
import { type LockConfigurationOptions, lockConfiguration } from '../../src/core/lock-configuration.ts'
import { activeFencingToken } from '../../src/core/lock-context.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import type { RunLedger, RunStart } from '../../src/core/run-ledger.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'
import { runLocked } from '../../src/testing/index.ts'

// Where a running task, and what watches it, finds its lock's fencing token (docs/fencing.md).
// The in-memory provider counts tokens per name from 1; `tokenless` is a store that has none.

const opts = (name = 'job'): LockConfigurationOptions => ({ name, lockAtMostFor: '10m' })

/** A provider whose locks carry no token, as memcached's. */
function tokenless(): LockProvider {
  const held = new Set<string>()
  return {
    async lock(configuration) {
      if (held.has(configuration.name)) return undefined
      held.add(configuration.name)
      return defineLock(configuration, { unlock: async () => void held.delete(configuration.name) })
    },
  }
}

describe('the task', () => {
  it('gets the token in its context and from activeFencingToken(), across awaits, increasing per name', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    const seen: Array<[bigint | undefined, bigint | undefined]> = []
    const task = async ({ fencingToken }: { fencingToken: bigint | undefined }) => {
      await sleep(1)
      seen.push([fencingToken, activeFencingToken()])
    }
    await executor.executeWithLock(task, opts('a'))
    await executor.executeWithLock(task, opts('a'))
    await executor.executeWithLock(task, opts('b'))
    expect(seen).toEqual([
      [1n, 1n],
      [2n, 2n],
      [1n, 1n],
    ])
  })

  it('activeFencingToken() gives the innermost lock: a nested other lock its own, a re-entrant call the outer one', async () => {
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    await executor.executeWithLock(async () => undefined, opts('inner'))
    const seen: Record<string, bigint | undefined> = {}
    await executor.executeWithLock(async ({ fencingToken }) => {
      seen.outer = fencingToken
      await executor.executeWithLock(({ fencingToken }) => {
        seen.inner = fencingToken
        seen.innerActive = activeFencingToken()
      }, opts('inner'))
      await executor.executeWithLock(({ fencingToken }) => {
        seen.reentrant = fencingToken
        seen.reentrantActive = activeFencingToken()
      }, opts('outer'))
      seen.afterInner = activeFencingToken()
    }, opts('outer'))
    expect(seen).toEqual({
      outer: 1n,
      inner: 2n,
      innerActive: 2n,
      reentrant: 1n,
      reentrantActive: 1n,
      afterInner: 1n,
    })
  })

  it('activeFencingToken() throws NoActiveLockError outside a locked task, and after it ended', async () => {
    expect(() => activeFencingToken()).toThrow(NoActiveLockError)
    expect(() => activeFencingToken()).toThrow(/call activeFencingToken\(\) inside the locked task/)
    let late: Promise<unknown> | undefined
    await createLockingTaskExecutor(inMemoryLockProvider()).executeWithLock(() => {
      late = sleep(5).then(() => activeFencingToken())
    }, opts())
    await expect(late).rejects.toThrow(NoActiveLockError)
  })

  it('a store without tokens: undefined in the context and from activeFencingToken()', async () => {
    const result = await createLockingTaskExecutor(tokenless()).executeWithLock(
      ({ fencingToken }) => [fencingToken, activeFencingToken()],
      opts(),
    )
    expect(result).toEqual({ executed: true, result: [undefined, undefined] })
  })

  it('runLocked() has no token unless given one', () => {
    expect(runLocked(() => activeFencingToken())).toBeUndefined()
    expect(runLocked(() => activeFencingToken(), 'named')).toBeUndefined()
    expect(runLocked(() => activeFencingToken(), { fencingToken: 42n })).toBe(42n)
    expect(() => runLocked(() => undefined, { fencingToken: 42 as unknown as bigint })).toThrow(
      'runLocked(): fencingToken must be a bigint (e.g. 42n), got number',
    )
  })
})

describe('what watches the run', () => {
  /** Every hook, recording the token its execution has when it is called. */
  function tokenListener(seen: Array<[string, bigint | undefined]>): LockingTaskExecutorListener {
    const hooks = ['onLockAttempt', 'onLockAcquired', 'onLockNotAcquired', 'onTaskStarted', 'onTaskFinished']
    const listener: Record<string, unknown> = {}
    for (const hook of hooks)
      listener[hook] = (...args: unknown[]) => {
        const execution = args.at(-1) as LockExecution
        seen.push([`${hook}${execution.reentrant ? ' (reentrant)' : ''}`, execution.fencingToken])
      }
    return listener as LockingTaskExecutorListener
  }

  it("listener hooks: the execution has no token before the lock is taken, the lock's from onLockAcquired on", async () => {
    const provider = inMemoryLockProvider()
    await provider.lock(lockConfiguration(opts('held')))
    const seen: Array<[string, bigint | undefined]> = []
    const executor = createLockingTaskExecutor(provider, { listener: tokenListener(seen) })
    await executor.executeWithLock(async () => {
      await executor.executeWithLock(() => undefined, opts())
    }, opts())
    await executor.executeWithLock(() => undefined, opts('held'))
    expect(seen).toEqual([
      ['onLockAttempt', undefined],
      ['onLockAcquired', 1n],
      ['onTaskStarted', 1n],
      ['onTaskStarted (reentrant)', 1n],
      ['onTaskFinished (reentrant)', 1n],
      ['onTaskFinished', 1n],
      ['onLockAttempt', undefined],
      ['onLockNotAcquired', undefined],
    ])
  })

  it('the execution stays frozen, and its token is no own property: it spreads and serializes without a bigint', async () => {
    let execution: LockExecution | undefined
    await createLockingTaskExecutor(inMemoryLockProvider(), {
      listener: {
        onTaskStarted(_configuration, e) {
          execution = e
        },
      },
    }).executeWithLock(() => undefined, opts())
    expect(execution!.fencingToken).toBe(1n)
    expect(Object.isFrozen(execution)).toBe(true)
    expect(() => {
      ;(execution as { id: number }).id = 99
    }).toThrow(TypeError)
    expect(JSON.parse(JSON.stringify(execution))).toEqual({
      id: execution!.id,
      provider: 'in-memory',
      reentrant: false,
    })
    expect({ ...execution }).not.toHaveProperty('fencingToken')
  })

  it('diagnostics messages carry the execution, with its token from lockAcquired on', async () => {
    const seen: Array<[string, bigint | undefined]> = []
    const handlers = (['lockAttempt', 'lockAcquired', 'taskFinished'] as const).map((event) => {
      const handler = (message: unknown) => seen.push([event, (message as LockEventMessage).execution.fencingToken])
      subscribe(diagnosticsChannels[event], handler)
      return [event, handler] as const
    })
    try {
      await createLockingTaskExecutor(inMemoryLockProvider()).executeWithLock(() => undefined, opts('diag'))
    } finally {
      for (const [event, handler] of handlers) unsubscribe(diagnosticsChannels[event], handler)
    }
    // The same execution object: by the time the handler reads it, the token is set.
    expect(seen).toEqual([
      ['lockAttempt', undefined],
      ['lockAcquired', 1n],
      ['taskFinished', 1n],
    ])
  })

  it('the logger adds fencingToken (a decimal string) to the lines of a run, and leaves it out without a token', async () => {
    const lines: Array<{ level: string; args: unknown[] }> = []
    const at =
      (level: string) =>
      (...args: unknown[]) =>
        lines.push({ level, args })
    const logger = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') }
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { logger })
    await executor.executeWithLock(() => undefined, opts('report'))
    await executor.executeWithLock(() => undefined, opts('report'))
    await createLockingTaskExecutor(tokenless(), { logger }).executeWithLock(() => undefined, opts('plain'))
    expect(lines.map((line) => line.args[1])).toEqual([
      { lock: 'report', provider: 'in-memory', fencingToken: '1', durationMs: expect.any(Number) },
      { lock: 'report', provider: 'in-memory', fencingToken: '2', durationMs: expect.any(Number) },
      { lock: 'plain', durationMs: expect.any(Number) },
    ])
  })

  // recordRunningAfter 0: every run's start is written, so the test sees each RunStart.
  it('the run ledger gets the token in RunStart.fencingToken, and no such key without one', async () => {
    const starts: RunStart[] = []
    const ledger: RunLedger = {
      name: 'recording',
      async start(run: RunStart) {
        starts.push(run)
        return { finish: async () => undefined }
      },
      record: async () => undefined,
      history: async () => [],
      tasks: async () => [],
    } as unknown as RunLedger
    const provider = inMemoryLockProvider()
    await createLockingTaskExecutor(provider, { runLedger: ledger, recordRunningAfter: 0 }).executeWithLock(
      () => undefined,
      opts('ledger'),
    )
    await createLockingTaskExecutor(provider, { runLedger: ledger, recordRunningAfter: 0 }).executeWithLock(
      () => undefined,
      {
        ...opts('ledger'),
        slot: new Date('2026-11-24T02:00:00Z'),
      },
    )
    await createLockingTaskExecutor(tokenless(), { runLedger: ledger, recordRunningAfter: 0 }).executeWithLock(
      () => undefined,
      opts('plain'),
    )
    expect(starts.map((start) => [start.name, start.fencingToken])).toEqual([
      ['ledger', 1n],
      ['ledger', 2n],
      ['plain', undefined],
    ])
    expect(Object.keys(starts[2]!)).not.toContain('fencingToken')
  })
})
