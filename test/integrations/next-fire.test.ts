import { CronJob } from 'cron'
import { Cron } from 'croner'
import cron from 'node-cron'
import schedule from 'node-schedule'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { createLockingTaskExecutor } from '../../src/core/locking-task-executor.ts'
import type { RunLedger } from '../../src/core/run-ledger.ts'
import { lockingTaskOptions } from '../../src/integrations/node-cron.ts'
import { withLock } from '../../src/integrations/with-lock.ts'
import { inMemoryLockProvider, inMemoryRunLedger } from '../../src/providers/in-memory/index.ts'

// Each scheduler, firing every second for real, gives the ledger its next fire time with each run:
// the whole second after the run, as the scheduler itself computes it.
function executorWithLedger(): { executor: ReturnType<typeof createLockingTaskExecutor>; ledger: RunLedger } {
  const ledger = inMemoryRunLedger()
  return { executor: createLockingTaskExecutor(inMemoryLockProvider(), { runLedger: ledger }), ledger }
}

async function expectNextSecond(ledger: RunLedger, name: string): Promise<void> {
  const runs = await ledger.history(name)
  expect(runs.length, `no run of ${name} within 2.5 s`).toBeGreaterThan(0)
  for (const run of runs) {
    expect(run.nextFireAt, `a run of ${name} without its next fire time`).toBeInstanceOf(Date)
    const next = run.nextFireAt!.getTime()
    // The next whole second after the run was written, on the scheduler's own clock.
    expect(next % 1000).toBe(0)
    expect(next).toBeGreaterThan(run.finishedAt!.getTime())
    expect(next - run.finishedAt!.getTime()).toBeLessThanOrEqual(1000)
  }
}

const lock = { lockAtMostFor: '10s' } as const

describe('the next fire time each scheduler gives the run ledger', () => {
  it('croner (the job, first argument), cron (onTick this), node-schedule (the job as this)', async () => {
    const { executor, ledger } = executorWithLedger()
    const croner = new Cron(
      '* * * * * *',
      withLock(executor, { name: 'croner', ...lock }, () => undefined),
    )
    const cronJob = CronJob.from({
      cronTime: '* * * * * *',
      onTick: withLock(executor, { name: 'cron', ...lock }, () => undefined),
      start: true,
    })
    const nodeSchedule = schedule.scheduleJob(
      '* * * * * *',
      withLock(executor, { name: 'node-schedule', ...lock }, () => undefined),
    )
    await sleep(2_500)
    croner.stop()
    await cronJob.stop()
    nodeSchedule.cancel()
    for (const name of ['croner', 'cron', 'node-schedule']) await expectNextSecond(ledger, name)
  })

  it('node-cron 4 (the run coordinator: the task it finds in node-cron registry)', async () => {
    const { executor, ledger } = executorWithLedger()
    const options = lockingTaskOptions(executor, { name: 'node-cron-next', ...lock })
    const task = cron.schedule('* * * * * *', () => undefined, options)
    await sleep(2_500)
    await task.destroy()
    await expectNextSecond(ledger, 'node-cron-next')
  })

  it('a nextFireAt option wins (setInterval); a plain call records none', async () => {
    const { executor, ledger } = executorWithLedger()
    const period = 200
    const tick = withLock(
      executor,
      { name: 'interval', ...lock, nextFireAt: () => new Date(Date.now() + period) },
      () => undefined,
    )
    const timer = setInterval(tick, period)
    await sleep(500)
    clearInterval(timer)
    await withLock(executor, { name: 'plain', ...lock }, () => undefined)()
    const [run] = await ledger.history('interval')
    expect(run!.nextFireAt!.getTime() - run!.finishedAt!.getTime()).toBeGreaterThanOrEqual(period - 5)
    expect(run!.nextFireAt!.getTime() - run!.finishedAt!.getTime()).toBeLessThanOrEqual(period + 50)
    expect((await ledger.history('plain'))[0]?.nextFireAt).toBeUndefined()
    expect(() => withLock(executor, { name: 'bad', ...lock, nextFireAt: 'soon' as never }, () => undefined)).toThrow(
      /nextFireAt must be a function/,
    )
  })
})
