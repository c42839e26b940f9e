import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { createLockingTaskExecutor, type LockingTaskExecutorListener } from '../../src/index.ts'
import { portOpen } from '../helpers/processes.ts'
import { POSTGRES_URL } from '../helpers/sql-pools.ts'
import { cli, startCli } from './support/cli.ts'
import { type CliStore, describeOnCliStores, type PostgresExtras } from './support/stores.ts'

// shedlock pause and resume (issue 46), the built bin against real stores: a pause is the task's
// lock held by "paused by …", which executors over the same store report as 'paused'.

const request = { lockAtMostFor: '10s' } as const
let counter = 0
const fresh = (): string => `pause-${process.pid}-${++counter}`

function pauseCases(store: () => CliStore): void {
  const pause = (name: string, ...extra: string[]) => cli(['pause', name, ...store().args, ...extra])
  const resume = (name: string, ...extra: string[]) => cli(['resume', name, ...store().args, ...extra])

  /** An executor over the store, and what its listener heard. */
  function executor() {
    const events: string[] = []
    const listener: LockingTaskExecutorListener = {
      onTaskPaused: (_, pause) => void events.push(`paused by ${pause.by}${pause.reason ? `: ${pause.reason}` : ''}`),
    }
    return { events, executor: createLockingTaskExecutor(store().provider(), { listener, runLedger: store().ledger }) }
  }

  it("pause: an executor over the store skips the task with reason 'paused'; list says paused; resume: it runs", async () => {
    const name = fresh()
    const paused = await pause(name, '--reason', 'deploy 4.2', '--by', 'alice@ops')
    expect(paused.code, paused.stderr).toBe(0)
    expect(paused.stdout).toMatch(
      new RegExp(`^paused ${name} until 20\\d\\d-\\S+Z \\(by alice@ops: deploy 4\\.2\\)\\n$`),
    )
    // Until resumed: years ahead, and never past what a MySQL TIMESTAMP holds.
    const until = (await store().inspector.get(name))!.lockUntil!.getTime()
    expect(until).toBeGreaterThan(Date.now() + 365 * 86_400_000)
    expect(until).toBeLessThanOrEqual(Date.UTC(2038, 0, 1))

    const { events, executor: app } = executor()
    let ran = 0
    expect(await app.executeWithLock(() => ran++, { name, ...request })).toEqual({ executed: false, reason: 'paused' })
    expect(events).toEqual(['paused by alice@ops: deploy 4.2'])
    const list = await cli(['list', ...store().args, '--prefix', name, '--json'])
    expect(JSON.parse(list.stdout).locks).toMatchObject([{ name, state: 'paused' }])

    const again = await pause(name, '--reason', 'other', '--json')
    expect(again.code, again.stderr).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({
      name,
      result: 'already-paused',
      pause: { by: 'alice@ops', reason: 'deploy 4.2' },
    })

    const resumed = await resume(name)
    expect(resumed).toMatchObject({ code: 0, stderr: '' })
    expect(resumed.stdout).toBe(`resumed ${name} (was paused by alice@ops: deploy 4.2)\n`)
    expect(await app.executeWithLock(() => ran++, { name, ...request })).toEqual({ executed: true, result: 0 })
    expect(await resume(name)).toMatchObject({ code: 0, stdout: `${name} is not paused; nothing to resume\n` })
    await app.close()
  })

  it('a slot due during a pause is recorded skipped with the pause as its cause: history and status show it', async () => {
    const name = fresh()
    expect((await pause(name, '--reason', 'maintenance', '--by', 'bob')).code).toBe(0)
    const { executor: app } = executor()
    const slot = new Date(Math.floor(Date.now() / 1000) * 1000)
    expect(await app.executeWithLock(() => 1, { name, ...request, slot })).toEqual({
      executed: false,
      reason: 'paused',
    })
    await app.close()
    const history = await cli(['history', name, ...store().historyArgs])
    expect(history.code, history.stderr).toBe(0)
    expect(history.stdout).toMatch(
      /^now paused by bob \(maintenance\) since \S+ until \S+ \(.+ left\): shedlock resume/m,
    )
    expect(history.stdout).toMatch(/ skipped \(paused\) .* {2}paused by bob \(maintenance\) until \S+$/m)
    const status = await cli(['status', ...store().historyArgs])
    expect(status.stdout).toMatch(new RegExp(`^${name} +paused by bob \\(maintenance\\) until \\S+ `, 'm'))
    expect(status.stdout).toMatch(/, \d+ paused; now /)
    const json = await cli(['status', '--json', ...store().historyArgs])
    const row = JSON.parse(json.stdout).tasks.find((task: { name: string }) => task.name === name)
    expect(row.paused).toEqual({ by: 'bob', reason: 'maintenance', until: expect.stringMatching(/^\d{4}-/) })
    expect((await resume(name)).code).toBe(0)
  })

  it('a run holds the lock: pause refuses and names it (exit 1), resume refuses too; --wait pauses once the run ends', async () => {
    const name = fresh()
    const run = await store()
      .provider('worker-7')
      .lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(run).toBeDefined()
    const refused = await pause(name)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(
      new RegExp(
        `^shedlock pause: lock "${name}" is held by worker-7:\\d+:[0-9a-f]{12} since \\S+ until \\S+ \\(\\d+s left\\): a run holds it, and a pause never cuts one short; not paused: pass --wait D`,
      ),
    )
    const notRun = await resume(name)
    expect(notRun.code).toBe(1)
    expect(notRun.stderr).toMatch(
      /a run holds it, not a pause, so nothing was resumed; "shedlock unlock .+" force-releases/,
    )
    expect((await store().inspector.get(name))?.lockedBy).toMatch(/^worker-7:/)

    const waiting = startCli(['pause', name, ...store().args, '--wait', '20s', '--by', 'carol'])
    await sleep(1_500)
    expect(waiting.stdout()).toBe('')
    await run!.unlock()
    const waited = await waiting.done
    expect(waited.code, waited.stderr).toBe(0)
    expect(waited.stdout).toMatch(new RegExp(`^paused ${name} until \\S+ \\(by carol\\)\\n$`))
    expect((await resume(name)).code).toBe(0)
  })

  it('--for 2s ends the pause by itself', async () => {
    const name = fresh()
    const paused = await pause(name, '--for', '2s', '--json')
    expect(paused.code, paused.stderr).toBe(0)
    const { until } = JSON.parse(paused.stdout).pause as { until: string }
    expect(Date.parse(until) - Date.now()).toBeLessThanOrEqual(2_000)
    const { executor: app } = executor()
    expect(await app.executeWithLock(() => 1, { name, ...request })).toEqual({ executed: false, reason: 'paused' })
    await sleep(Math.max(0, Date.parse(until) - Date.now()) + 100)
    expect(await app.executeWithLock(() => 2, { name, ...request })).toEqual({ executed: true, result: 2 })
    await app.close()
  })
}

/** On PostgreSQL: Java ShedLock's own statements against a paused task. */
function javaCases(extras: () => PostgresExtras): void {
  it("Java ShedLock's own acquire statements find a paused task's lock held, and take it once resumed", async () => {
    const { db, table } = extras()
    const args = ['--url', POSTGRES_URL, '--table', table]
    const name = fresh()
    expect((await cli(['pause', name, ...args, '--reason', 'deploy'])).code).toBe(0)
    // Java ShedLock's PostgreSQL statements (shedlock-provider-jdbc-template), parameters as it
    // binds them: PostgresSqlStatementsSource's insert-or-take-over, SqlStatementsSource's update
    // (its fallback after a duplicate key), and PostgresSqlServerTimeStatementsSource's
    // (usingDbTime()) insert-or-take-over.
    const javaInsert = () => {
      const now = new Date()
      return db.query(
        `INSERT INTO ${table}(name, lock_until, locked_at, locked_by) VALUES($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET lock_until = $2, locked_at = $3, locked_by = $4 WHERE ${table}.lock_until <= $3`,
        [name, new Date(now.getTime() + 60_000), now, 'java-host'],
      )
    }
    const javaUpdate = () => {
      const now = new Date()
      return db.query(
        `UPDATE ${table} SET lock_until = $1, locked_at = $2, locked_by = $3 WHERE name = $4 AND lock_until <= $2`,
        [new Date(now.getTime() + 60_000), now, 'java-host', name],
      )
    }
    const javaNow = "timezone('utc', CURRENT_TIMESTAMP)"
    const javaDbTime = () =>
      db.query(
        `INSERT INTO ${table}(name, lock_until, locked_at, locked_by) VALUES($1, ${javaNow} + make_interval(secs => $2), ${javaNow}, 'java-host') ON CONFLICT (name) DO UPDATE SET lock_until = ${javaNow} + make_interval(secs => $2), locked_at = ${javaNow}, locked_by = 'java-host' WHERE ${table}.name = $1 AND ${table}.lock_until <= ${javaNow}`,
        [name, 60],
      )
    expect((await javaInsert()).rowCount).toBe(0)
    expect((await javaUpdate()).rowCount).toBe(0)
    expect((await javaDbTime()).rowCount).toBe(0)
    const { rows } = await db.query(`SELECT locked_by FROM ${table} WHERE name = $1`, [name])
    expect(rows[0].locked_by).toMatch(/^paused by \S+ — deploy:\d+:[0-9a-f]{12}$/)
    expect((await cli(['resume', name, ...args])).code).toBe(0)
    expect((await javaInsert()).rowCount).toBe(1)
  })
}

await describeOnCliStores('shedlock pause and resume', pauseCases, javaCases)

const memcachedUp = await portOpen(11211)

describe.skipIf(!memcachedUp)('a store that cannot hold a pause', () => {
  it('memcached: pause fails with the reason (exit 1), before writing anything', async () => {
    const run = await cli(['pause', 'report', '--url', 'memcached://127.0.0.1:11211'])
    expect(run).toMatchObject({ code: 1, stdout: '' })
    expect(run.stderr).toMatch(/^shedlock pause: memcached cannot hold a pause: its provider takes no holder name/)
  })
})
