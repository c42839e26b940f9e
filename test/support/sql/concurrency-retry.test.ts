import { describe, expect, it } from 'vitest'
import { retryAfterFirst, retryConcurrencyFailures } from '../../../src/support/sql/concurrency-retry.ts'

class Deadlock extends Error {}
const isDeadlock = (error: unknown): boolean => error instanceof Deadlock

/** An attempt that fails with each of `failures` in turn, then resolves to the number of calls. */
function attempts(...failures: (Error | 'sync')[]): { calls: () => number; attempt: () => Promise<number> } {
  let calls = 0
  return {
    calls: () => calls,
    attempt: () => {
      const failure = failures[calls++]
      if (failure === 'sync') throw new Deadlock('thrown before a promise')
      return failure ? Promise.reject(failure) : Promise.resolve(calls)
    },
  }
}

describe('retryConcurrencyFailures', () => {
  it('resolves with the first attempt when it succeeds, and makes no other', async () => {
    const { attempt, calls } = attempts()
    await expect(retryConcurrencyFailures(attempt, isDeadlock)).resolves.toBe(1)
    expect(calls()).toBe(1)
  })

  it('retries concurrency failures, rejected or thrown, until an attempt succeeds', async () => {
    const { attempt, calls } = attempts(new Deadlock('first'), 'sync', new Deadlock('third'))
    await expect(retryConcurrencyFailures(attempt, isDeadlock)).resolves.toBe(4)
    expect(calls()).toBe(4)
  })

  it('does not retry any other error', async () => {
    const other = new Error('syntax error')
    const { attempt, calls } = attempts(new Deadlock('first'), other)
    await expect(retryConcurrencyFailures(attempt, isDeadlock)).rejects.toBe(other)
    expect(calls()).toBe(2)
  })

  it('rejects with the last concurrency failure after the given number of retries', async () => {
    const last = new Deadlock('third')
    const { attempt, calls } = attempts(
      new Deadlock('first'),
      new Deadlock('second'),
      last,
      new Deadlock('never reached'),
    )
    await expect(retryConcurrencyFailures(attempt, isDeadlock, 2)).rejects.toBe(last)
    expect(calls()).toBe(3)
  })

  it('with no retries, answers with the first attempt, failed or not', async () => {
    const first = new Deadlock('first')
    const { attempt, calls } = attempts(first)
    await expect(retryConcurrencyFailures(attempt, isDeadlock, 0)).rejects.toBe(first)
    expect(calls()).toBe(1)
  })
})

describe('retryAfterFirst', () => {
  it("takes the caller's first attempt as it is, and retries only after a concurrency failure", async () => {
    const { attempt, calls } = attempts()
    await expect(retryAfterFirst(Promise.resolve(0), attempt, isDeadlock)).resolves.toBe(0)
    expect(calls()).toBe(0)
    await expect(retryAfterFirst(Promise.reject(new Deadlock('first')), attempt, isDeadlock)).resolves.toBe(1)
    expect(calls()).toBe(1)
  })

  it('counts the first attempt among the tries, and passes any other error of it as it is', async () => {
    const last = new Deadlock('second')
    const { attempt, calls } = attempts(last, new Deadlock('never reached'))
    await expect(retryAfterFirst(Promise.reject(new Deadlock('first')), attempt, isDeadlock, 1)).rejects.toBe(last)
    expect(calls()).toBe(1)
    const other = new Error('syntax error')
    await expect(retryAfterFirst(Promise.reject(other), attempt, isDeadlock)).rejects.toBe(other)
    expect(calls()).toBe(1)
  })
})
