import { setTimeout as sleep } from 'node:timers/promises'
import { Cron } from 'croner'
import { expect, it } from 'vitest'
import { createDashboard } from '../../src/dashboard/index.ts'
import { createLockingTaskExecutor, withLock } from '../../src/index.ts'
import { cli } from './support/cli.ts'
import { type CliStore, describeOnCliStores } from './support/stores.ts'

// Overdue tasks (issue 46): a croner job under withLock records its next fire time with each run;
// once the schedule stops (every replica down), `shedlock status` says the task is overdue, from
// the store alone, and the dashboard's /healthz answers 503 naming it.

interface StatusJson {
  overdue: string[]
  tasks: { name: string; state: string; lastRun: { nextFireAt: string | null } | null }[]
}

let counter = 0
const fresh = (): string => `overdue-${process.pid}-${++counter}`

function overdueCases(store: () => CliStore): void {
  const statusOf = (...args: string[]) => cli(['status', ...args, ...store().historyArgs])
  it('a task whose schedule stopped is overdue once its next fire time passes by --grace: exit 1, /healthz 503', async () => {
    const name = fresh()
    const executor = createLockingTaskExecutor(store().provider(), { runLedger: store().ledger })
    const job = new Cron(
      '* * * * * *',
      withLock(executor, { name, lockAtMostFor: '10s' }, () => undefined),
    )
    try {
      await sleep(2_200)
      const status = await statusOf('--json', '--grace', '1500ms')
      expect(status.code, status.stderr).toBe(0)
      const running = (JSON.parse(status.stdout) as StatusJson).tasks.find((task) => task.name === name)
      expect(running?.state).toBe('ok')
      // The whole second after the latest run: croner's own next fire time.
      expect(Date.parse(running!.lastRun!.nextFireAt!) % 1000).toBe(0)
    } finally {
      job.stop()
      await executor.close()
    }
    // Every replica is down now: only the store knows when the task was due.
    await sleep(2_600)
    const stopped = await statusOf('--grace', '1500ms')
    expect(stopped.code, stopped.stderr).toBe(1)
    expect(stopped.stdout).toMatch(new RegExp(`${name} +overdue \\(due \\d+s ago\\)`))
    const json = JSON.parse((await statusOf('--json', '--grace', '1500ms')).stdout) as StatusJson
    expect(json.overdue).toContain(name)
    // A generous grace: not yet overdue.
    const patient = await statusOf('--json', '--grace', '1h')
    expect((JSON.parse(patient.stdout) as StatusJson).overdue).not.toContain(name)

    const dashboard = createDashboard({
      stores: [{ label: 'store', inspector: store().inspector, runLedger: store().ledger }],
      overdueGrace: '1500ms',
    })
    const health = await dashboard.health()
    expect(health.healthy).toBe(false)
    expect(health.stores[0]!.overdue).toContain(name)

    // Paused on purpose: its fire times are skipped, not missed.
    expect((await cli(['pause', name, ...store().args])).code).toBe(0)
    const paused = JSON.parse((await statusOf('--json', '--grace', '1500ms')).stdout) as StatusJson
    expect(paused.overdue).not.toContain(name)
  })
}

await describeOnCliStores('overdue tasks', overdueCases)
