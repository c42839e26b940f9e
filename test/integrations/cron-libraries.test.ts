import { CronJob } from 'cron'
import { Cron } from 'croner'
import schedule from 'node-schedule'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { LockProviderError } from '../../src/core/errors.ts'
import type { LockProvider } from '../../src/core/lock-provider.ts'
import { type WithLockOptions, withLock } from '../../src/integrations/with-lock.ts'

// What the README says about a store failure under each scheduler: the task does not run, and the
// LockProviderError reaches the handler shown, instead of an unhandled rejection that would end
// the process (vitest fails the run on one). Real time: each fires once, within about 1 s.
const failing: LockProvider = {
  lock: async (configuration) => {
    throw new LockProviderError('connection refused', { provider: 'test', lockName: configuration.name })
  },
}
const options = { name: 'job', lockAtMostFor: '1m' } satisfies WithLockOptions

describe('a store failure under each scheduler', () => {
  it('croner: withLock onError, or croner catch, receives the LockProviderError; the task does not run', async () => {
    const ran: string[] = []
    const viaOnError: unknown[] = []
    const viaCatch: unknown[] = []
    const jobs = [
      new Cron(
        '* * * * * *',
        { maxRuns: 1 },
        withLock(failing, { ...options, onError: (error) => viaOnError.push(error) }, () => void ran.push('onError')),
      ),
      new Cron(
        '* * * * * *',
        { maxRuns: 1, catch: (error) => viaCatch.push(error) },
        withLock(failing, options, () => void ran.push('catch')),
      ),
    ]
    await sleep(1_200)
    for (const job of jobs) job.stop()
    expect(ran).toEqual([])
    expect(viaOnError).toHaveLength(1)
    expect(viaOnError[0]).toBeInstanceOf(LockProviderError)
    expect(viaCatch).toHaveLength(1)
    expect(viaCatch[0]).toBeInstanceOf(LockProviderError)
  })

  it('cron: errorHandler receives the LockProviderError (with and without waitForCompletion)', async () => {
    const ran: string[] = []
    const handled: unknown[] = []
    const jobs = [false, true].map((waitForCompletion) =>
      CronJob.from({
        cronTime: '* * * * * *',
        onTick: withLock(failing, options, () => void ran.push('tick')),
        errorHandler: (error) => void handled.push(error),
        waitForCompletion,
        start: true,
      }),
    )
    await sleep(1_200)
    for (const job of jobs) await job.stop()
    expect(ran).toEqual([])
    expect(handled.length).toBeGreaterThanOrEqual(2)
    for (const error of handled) expect(error).toBeInstanceOf(LockProviderError)
  })

  it("node-schedule: the job's 'error' listener receives the LockProviderError", async () => {
    const ran: string[] = []
    const handled: unknown[] = []
    const job = schedule.scheduleJob(
      '* * * * * *',
      withLock(failing, options, () => void ran.push('tick')),
    )
    job.on('error', (error) => handled.push(error))
    await sleep(1_200)
    job.cancel()
    expect(ran).toEqual([])
    expect(handled.length).toBeGreaterThanOrEqual(1)
    expect(handled[0]).toBeInstanceOf(LockProviderError)
  })
})
