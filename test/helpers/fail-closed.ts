import { expect } from 'vitest'
import { createLockingTaskExecutor, type LockProvider, LockProviderError, lockConfiguration } from '../../src/index.ts'

/**
 * Asserts that `provider` fails closed for the lock `name` while its store is unreachable:
 * `lock()` rejects with a `LockProviderError` that names the lock (and matches `message`, when
 * given) and keeps the driver's error as `cause`; and an executor over it rejects the same way
 * without running the task.
 */
export async function assertFailsClosed(
  provider: LockProvider,
  name: string,
  message?: string | RegExp,
): Promise<void> {
  const config = () => lockConfiguration({ name, lockAtMostFor: '5m' })
  const error = await provider.lock(config()).then(
    (lock) => new Error(`lock "${name}" was ${lock ? 'acquired' : 'reported as held'} while the store is down`),
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(LockProviderError)
  expect((error as Error).message).toContain(`"${name}"`)
  if (message !== undefined) expect((error as Error).message).toMatch(message)
  expect((error as Error).cause, `the LockProviderError of "${name}" has no cause`).toBeDefined()
  let ran = false
  await expect(
    createLockingTaskExecutor(provider).executeWithLock(() => {
      ran = true
    }, config()),
  ).rejects.toBeInstanceOf(LockProviderError)
  expect(ran, `the task of "${name}" ran while the store is down`).toBe(false)
}

/**
 * Asserts that every call of a batch failed alone and said so: each settled call rejected with a
 * `LockProviderError` whose message names its own lock, `names[i]` for `settled[i]`.
 */
export function expectEachRejectedNaming(
  settled: readonly PromiseSettledResult<unknown>[],
  names: readonly string[],
): void {
  expect(settled).toHaveLength(names.length)
  for (const [i, s] of settled.entries()) {
    expect(s.status).toBe('rejected')
    const reason = (s as PromiseRejectedResult).reason as Error
    expect(reason).toBeInstanceOf(LockProviderError)
    expect(reason.message).toContain(`"${names[i]}"`)
  }
}
