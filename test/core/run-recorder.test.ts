import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it, vi } from 'vitest'
import { LockConfigurationError } from '../../src/core/errors.ts'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import type { RunEnd, RunLedger, RunStart } from '../../src/core/run-ledger.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/provider.ts'
import { inMemoryRunLedger } from '../../src/providers/in-memory/run-ledger.ts'
import { deferred, recordingListener } from '../helpers/fakes.ts'

const T = new Date('2026-11-24T02:00:00.000Z')

/** An in-memory ledger that logs which of its writes the executor called, and when (ms after `since`). */
function loggingLedger(since = performance.now()) {
  const inner = inMemoryRunLedger()
  const calls: { call: 'start' | 'finish' | 'record'; at: number; run: Partial<RunStart & RunEnd> }[] = []
  const at = () => performance.now() - since
  const ledger: RunLedger = {
    ...inner,
    async start(run) {
      calls.push({ call: 'start', at: at(), run })
      const handle = await inner.start(run)
      return {
        id: handle.id,
        finish: (end) => {
          calls.push({ call: 'finish', at: at(), run: end })
          return handle.finish(end)
        },
      }
    },
    record(run) {
      calls.push({ call: 'record', at: at(), run })
      return inner.record(run)
    },
  }
  return { ledger, calls }
}

describe('the run recorder', () => {
  it('a run shorter than recordRunningAfter is one record(), with its outcome and the fencing token the task saw', async () => {
    const { ledger, calls } = loggingLedger()
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { runLedger: ledger, node: 'web-1' })
    let token: bigint | undefined
    await executor.executeWithLock(
      async (context) => {
        token = context.fencingToken
        await sleep(20)
      },
      { name: 'report', lockAtMostFor: '1m', slot: T },
    )
    await expect(
      executor.executeWithLock(() => Promise.reject(new RangeError('bad')), { name: 'report', lockAtMostFor: '1m' }),
    ).rejects.toThrow('bad')
    expect(typeof token).toBe('bigint')
    expect(calls.map((c) => c.call)).toEqual(['record', 'record'])
    expect(calls[0]!.run).toMatchObject({ name: 'report', slot: T, node: 'web-1', outcome: 'ok', fencingToken: token })
    expect(calls[0]!.run.durationMs).toBeGreaterThanOrEqual(15)
    expect(calls[1]!.run).toMatchObject({ outcome: 'failed', error: { type: 'RangeError', message: 'bad' } })
    expect(calls[1]!.run.fencingToken).toBe(token! + 1n)
  })

  it('a run still going after recordRunningAfter is written as running then, and its end later', async () => {
    const since = performance.now()
    const { ledger, calls } = loggingLedger(since)
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { runLedger: ledger, recordRunningAfter: 50 })
    let token: bigint | undefined
    await executor.executeWithLock(
      async (context) => {
        token = context.fencingToken
        await vi.waitFor(() => expect(calls).toHaveLength(1), { timeout: 3_000 })
        expect((await ledger.history('report'))[0]).toMatchObject({ outcome: 'running', fencingToken: token })
      },
      { name: 'report', lockAtMostFor: '1m' },
    )
    expect(calls.map((c) => c.call)).toEqual(['start', 'finish'])
    expect(calls[0]!.at).toBeGreaterThanOrEqual(45)
    expect(calls[0]!.run.fencingToken).toBe(token)
    expect(calls[1]!.run.outcome).toBe('ok')
    const [run] = await ledger.history('report')
    expect(run).toMatchObject({ outcome: 'ok', fencingToken: token })
  })

  it('recordRunningAfter 0: the task starts once its start is in the ledger, so a run killed at once leaves its row', async () => {
    const { ledger, calls } = loggingLedger()
    const stored = deferred()
    const slow: RunLedger = { ...ledger, start: (run) => stored.promise.then(() => ledger.start(run)) }
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), { runLedger: slow, recordRunningAfter: 0 })
    let started = false
    const ran = executor.executeWithLock(
      async () => {
        started = true
        expect((await ledger.history('report')).map((r) => r.outcome)).toEqual(['running'])
      },
      { name: 'report', lockAtMostFor: '1m' },
    )
    await sleep(50)
    expect(started).toBe(false)
    stored.resolve()
    await ran
    expect(started).toBe(true)
    expect(calls.map((c) => c.call)).toEqual(['start', 'finish'])
  })

  it('recordRunningAfter 0: a start write that fails is reported, and the task runs all the same', async () => {
    const listener = recordingListener([], ['onRunLedgerFailed'])
    const failing: RunLedger = { ...inMemoryRunLedger(), start: () => Promise.reject(new Error('ledger down')) }
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), {
      runLedger: failing,
      recordRunningAfter: 0,
      listener,
    })
    expect(await executor.executeWithLock(() => 'ran', { name: 'report', lockAtMostFor: '1m' })).toEqual({
      executed: true,
      result: 'ran',
    })
    expect(listener.log).toEqual(['onRunLedgerFailed report'])
  })

  it('a ledger without record() (plain JavaScript) gets start() and finish() of a short run, and of a skipped slot', async () => {
    const { ledger, calls } = loggingLedger()
    const { record: _record, ...withoutRecord } = ledger
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), {
      runLedger: withoutRecord as RunLedger,
    })
    await executor.executeWithLock(() => 1, { name: 'report', lockAtMostFor: '1m' })
    expect(calls.map((c) => c.call)).toEqual(['start', 'finish'])
    expect((await ledger.history('report')).map((r) => r.outcome)).toEqual(['ok'])
  })

  it('a ledger that throws from start() in the timer is reported, never thrown', async () => {
    const listener = recordingListener([], ['onRunLedgerFailed'])
    const throwing: RunLedger = {
      ...inMemoryRunLedger(),
      start: () => {
        throw new Error('not a promise')
      },
    }
    const executor = createLockingTaskExecutor(inMemoryLockProvider(), {
      runLedger: throwing,
      recordRunningAfter: 10,
      listener,
    })
    const release = deferred()
    const ran = executor.executeWithLock(() => release.promise.then(() => 'ran'), {
      name: 'report',
      lockAtMostFor: '1m',
    })
    await sleep(50)
    release.resolve()
    expect(await ran).toEqual({ executed: true, result: 'ran' })
    expect(listener.log).toEqual(['onRunLedgerFailed report'])
  })

  it('a bad recordRunningAfter is refused when the executor is made', () => {
    for (const bad of [-1, '-1s', 'soon', Number.NaN])
      expect(() =>
        createLockingTaskExecutor(inMemoryLockProvider(), {
          runLedger: inMemoryRunLedger(),
          recordRunningAfter: bad as never,
        }),
      ).toThrow(LockConfigurationError)
  })
})
