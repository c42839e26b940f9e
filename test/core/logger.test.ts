import { describe, expect, it } from 'vitest'
import { createLockingTaskExecutor, type LockingTaskExecutorListener, type ShedlockLogger } from '../../src/index.ts'
import { inMemoryLockProvider } from '../../src/providers/in-memory/index.ts'

// The executor's `logger` option: what a plain app sees without writing a listener.

type Line = { level: string; args: unknown[] }

function consoleLike(): { logger: ShedlockLogger; lines: Line[] } {
  const lines: Line[] = []
  const at =
    (level: string) =>
    (...args: unknown[]) =>
      lines.push({ level, args })
  return { logger: { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') }, lines }
}

describe('executor logger', () => {
  it('logs a run at info, a failure at error (redacted), a lock held elsewhere at debug', async () => {
    const { logger, lines } = consoleLike()
    const provider = inMemoryLockProvider()
    const executor = createLockingTaskExecutor(provider, { logger })
    await executor.executeWithLock(() => undefined, { name: 'report', lockAtMostFor: '1m' })
    await expect(
      executor.executeWithLock(
        () => {
          throw new Error('connect postgres://app:pw-secret@db/app refused')
        },
        { name: 'billing', lockAtMostFor: '1m' },
      ),
    ).rejects.toThrow()
    await executor.executeWithLock(
      () => executor.executeWithLock(() => undefined, { name: 'other', lockAtMostFor: '1m' }),
      {
        name: 'outer',
        lockAtMostFor: '1m',
      },
    )
    const other = createLockingTaskExecutor(provider, { logger })
    let release: () => void = () => undefined
    const holding = executor.executeWithLock(() => new Promise<void>((resolve) => (release = resolve)), {
      name: 'held',
      lockAtMostFor: '1m',
    })
    await other.executeWithLock(() => undefined, { name: 'held', lockAtMostFor: '1m' })
    release()
    await holding
    const text = lines.map((l) => `${l.level} ${String(l.args[0])}`)
    expect(text).toContainEqual(expect.stringMatching(/^info shedlock: task "report" ran in \d+ ms$/))
    expect(text).toContainEqual(
      'error shedlock: task "billing" failed after 0 ms: Error: connect postgres://app:***@db/app refused',
    )
    expect(text).toContainEqual('debug shedlock: task "held" skipped: its lock is held elsewhere')
    expect(JSON.stringify(lines)).not.toContain('pw-secret')
    expect(lines.find((l) => String(l.args[0]).includes('"report" ran'))?.args[1]).toMatchObject({
      lock: 'report',
      durationMs: expect.any(Number),
    })
  })

  it('calls a pino-shaped logger (it has bindings()) with the fields first', async () => {
    const lines: Line[] = []
    const at =
      (level: string) =>
      (...args: unknown[]) =>
        lines.push({ level, args })
    const pino = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), bindings: () => ({}) }
    await createLockingTaskExecutor(inMemoryLockProvider(), { logger: pino }).executeWithLock(() => undefined, {
      name: 'report',
      lockAtMostFor: '1m',
    })
    expect(lines).toEqual([
      {
        level: 'info',
        args: [
          { lock: 'report', provider: expect.any(String), fencingToken: '1', durationMs: expect.any(Number) },
          expect.stringMatching(/^shedlock: task "report" ran in/),
        ],
      },
    ])
  })

  it('keeps the listener: both get every event, and a throwing listener does not silence the logger', async () => {
    const { logger, lines } = consoleLike()
    const seen: string[] = []
    const listener: LockingTaskExecutorListener = {
      onTaskFinished(configuration) {
        seen.push(configuration.name)
        throw new Error('listener bug')
      },
    }
    await createLockingTaskExecutor(inMemoryLockProvider(), { listener, logger }).executeWithLock(() => undefined, {
      name: 'report',
      lockAtMostFor: '1m',
    })
    expect(seen).toEqual(['report'])
    expect(lines.map((l) => l.level)).toEqual(['info'])
  })

  it('refuses a logger without error, warn and info', () => {
    expect(() =>
      createLockingTaskExecutor(inMemoryLockProvider(), {
        logger: { info: () => undefined } as unknown as ShedlockLogger,
      }),
    ).toThrow(/logger must have error, warn and info/)
  })
})
