import { afterEach, describe, expect, it, vi } from 'vitest'
import { inMemoryLockProvider } from '../../../src/providers/in-memory/provider.ts'
import { inMemoryRunLedger } from '../../../src/providers/in-memory/run-ledger.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'

describe('inMemoryRunLedger', () => {
  registerRunLedgerSuite(
    runLedgerSuite({ ledger: inMemoryRunLedger({ keep: 5 }), keep: 5, provider: () => inMemoryLockProvider() }),
  )

  afterEach(() => void vi.useRealTimers())

  it('maxAge reaches every task: a task that stopped running is gone once its runs are older than maxAge', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.UTC(2026, 0, 1) })
    const ledger = inMemoryRunLedger({ maxAge: '30d' })
    const run = (name: string) => ({
      name,
      slot: undefined,
      node: 'n',
      startedAt: new Date(),
      finishedAt: new Date(),
      outcome: 'ok' as const,
      durationMs: 1,
    })
    await ledger.record(run('renamed'))
    await ledger.record(run('current'))
    vi.setSystemTime(Date.UTC(2026, 0, 31, 0, 0, 1))
    await ledger.record(run('current'))
    expect((await ledger.tasks()).map((t) => t.name)).toEqual(['current'])
    expect(await ledger.history('renamed')).toEqual([])
    expect((await ledger.health('renamed')).lastRun).toBeUndefined()
    expect((await ledger.history('current')).length).toBe(1)
    expect(() => inMemoryRunLedger({ maxAge: 0 })).toThrow(/maxAge must be longer than 0ms/)
  })
})
