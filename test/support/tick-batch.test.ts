// TickBatch: requests of one turn of the event loop sent together. A core unit: the sender is a
// function of the test's, which records what it was given.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { TickBatch } from '../../src/support/tick-batch.ts'

// A sender that answers each item doubled, and records the batches it was given.
function doubling(max?: number) {
  const batches: number[][] = []
  const batch = new TickBatch<number, number>(async (items) => {
    batches.push([...items])
    return items.map((n) => n * 2)
  }, max)
  return { batch, batches }
}

describe('TickBatch', () => {
  it('sends the requests of one turn as one batch, and answers each its own', async () => {
    const { batch, batches } = doubling()
    const answers = await Promise.all([1, 2, 3].map((n) => batch.add(n)))
    expect(answers).toEqual([2, 4, 6])
    expect(batches).toEqual([[1, 2, 3]])
  })

  it('gathers the requests of timers that expire in the same timers phase', async () => {
    const { batch, batches } = doubling()
    const answers = await new Promise<number[]>((resolve) => {
      const all: Promise<number>[] = []
      for (let n = 1; n <= 5; n++) setTimeout(() => all.push(batch.add(n)), 5)
      setTimeout(() => void Promise.all(all).then(resolve), 50)
    })
    expect(answers).toEqual([2, 4, 6, 8, 10])
    expect(batches).toEqual([[1, 2, 3, 4, 5]])
  })

  it('sends the requests of later turns in batches of their own', async () => {
    const { batch, batches } = doubling()
    const first = batch.add(1)
    await nextTurn()
    const second = batch.add(2)
    expect(await Promise.all([first, second])).toEqual([2, 4])
    expect(batches).toEqual([[1], [2]])
  })

  it('sends a full batch at once, and the rest of the turn after it', async () => {
    const { batch, batches } = doubling(2)
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => batch.add(n)))
    expect(answers).toEqual([2, 4, 6, 8, 10])
    expect(batches).toEqual([[1, 2], [3, 4], [5]])
  })

  it('an Error answer rejects its request alone', async () => {
    const batch = new TickBatch<number, number>(async (items) =>
      items.map((n) => (n === 2 ? new Error('two refused') : n)),
    )
    const settled = await Promise.allSettled([1, 2, 3].map((n) => batch.add(n)))
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect((settled[1] as PromiseRejectedResult).reason).toEqual(new Error('two refused'))
  })

  it('a failed send, thrown or rejected, rejects every request of the batch with its error', async () => {
    const failure = new Error('store down')
    for (const send of [
      async () => Promise.reject(failure),
      () => {
        throw failure
      },
    ]) {
      const batch = new TickBatch<number, number>(send)
      const settled = await Promise.allSettled([1, 2].map((n) => batch.add(n)))
      expect(settled).toEqual([
        { status: 'rejected', reason: failure },
        { status: 'rejected', reason: failure },
      ])
    }
  })

  it('a send that answers too few items rejects those left without an answer', async () => {
    const batch = new TickBatch<number, number>(async (items) => items.slice(0, 1))
    const settled = await Promise.allSettled([1, 2].map((n) => batch.add(n)))
    expect(settled[0]).toEqual({ status: 'fulfilled', value: 1 })
    expect(settled[1]!.status).toBe('rejected')
  })
})
