import { afterAll, describe, expect, it } from 'vitest'
import { slotRecordName } from '../../src/index.ts'
import { postgresLockInspector, postgresSchema } from '../../src/providers/postgres/index.ts'
import { uniqueTable } from '../helpers/backends.ts'
import { POSTGRES_URL, postgresPoolOrSkip } from '../helpers/sql-pools.ts'
import { cli, type StartedCli, startCli, waitFor } from './support/cli.ts'

// shedlock run --slot, on PostgreSQL (the built bin, as users run it).
const pool = await postgresPoolOrSkip(2)
const table = uniqueTable('cli_slot')
if (pool) await pool.query(postgresSchema({ tableName: table }))
afterAll(async () => {
  await pool?.query(`DROP TABLE IF EXISTS ${table}`)
  await pool?.end()
})

const run = (name: string, slot: string, ...command: string[]) =>
  cli([
    'run',
    '--url',
    POSTGRES_URL,
    '--table',
    table,
    '--name',
    name,
    '--lock-at-most-for',
    '1m',
    '--slot',
    slot,
    '--',
    ...command,
  ])

describe.skipIf(!pool)('shedlock run --slot', () => {
  it('runs the command once per slot: a later host, after the lock was released, prints a skipped line and exits 0', async () => {
    const first = await run(
      'report',
      '2026-11-24T02:00:00Z',
      process.execPath,
      '-e',
      'console.log("ran"); process.exit(3)',
    )
    expect(first).toMatchObject({ code: 3, stdout: 'ran\n', stderr: '' })
    // The same slot written with another offset is the same instant.
    const again = await run('report', '2026-11-24T03:00:00+01:00', process.execPath, '-e', 'console.log("ran again")')
    expect(again).toMatchObject({ code: 0, stderr: '' })
    expect(again.stdout).toBe(
      'skipped: slot 2026-11-24T02:00:00.000Z of lock "report" already ran (or was skipped) on another host\n',
    )
    expect((await run('report', '2026-11-24T02:01:00Z', 'true')).code).toBe(0)
    const { rows } = await pool!.query<{ name: string }>(`SELECT name FROM ${table} ORDER BY name`)
    expect(rows.map((row) => row.name)).toEqual(['report', 'report@20261124T020000Z', 'report@20261124T020100Z'])
  })

  it('--slot minute: the current minute on this host, so two hosts of one crontab line agree', async () => {
    // A name of its own per attempt: a retry within the same minute would find its slot run.
    const name = `every-minute-${Date.now()}`
    const runs = await Promise.all([1, 2].map(() => run(name, 'minute', process.execPath, '-e', 'console.log("ran")')))
    const ran = runs.filter((r) => r.stdout === 'ran\n')
    for (const r of runs) expect(r.code).toBe(0)
    const { rows } = await pool!.query<{ name: string }>(`SELECT name FROM ${table} WHERE name LIKE '${name}@%'`)
    for (const row of rows) expect(row.name).toMatch(new RegExp(`^${name}@\\d{8}T\\d{4}00Z$`))
    // One minute: one ran, one was skipped. Two calls that straddle a minute's boundary claim a
    // slot each, and the later one may still find the earlier one's run holding the task's lock.
    if (rows.length === 1) expect(ran.length).toBe(1)
    else {
      expect(rows.length).toBe(2)
      expect(ran.length).toBeGreaterThanOrEqual(1)
    }
  })

  it('quiet: no skipped line', async () => {
    await run('quiet', '2026-01-01', 'true')
    const skipped = await cli([
      'run',
      '--url',
      POSTGRES_URL,
      '--table',
      table,
      '--name',
      'quiet',
      '--lock-at-most-for',
      '1m',
      '--slot',
      '2026-01-01',
      '--quiet',
      '--',
      'true',
    ])
    expect(skipped).toMatchObject({ code: 0, stdout: '', stderr: '' })
  })
})

describe.skipIf(!pool)('shedlock run --slot stopped by a signal before the command starts', () => {
  const db = pool!
  const inspector = postgresLockInspector({ client: db, tableName: table })

  /**
   * Starts `shedlock run ...args` and sends it SIGTERM while it waits for the lock of `name`: a
   * transaction of this test holds the lock's row (an expired lock, free to take), so the CLI's
   * INSERT ... ON CONFLICT waits for it; the transaction ends once the CLI said it got the signal.
   */
  async function stoppedWhileLocking(name: string, args: string[]): Promise<Awaited<StartedCli['done']>> {
    await db.query(
      `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES ($1, timezone('utc', now()) - interval '1 minute', timezone('utc', now()) - interval '2 minutes', 'earlier')`,
      [name],
    )
    const hostage = await db.connect()
    try {
      await hostage.query('BEGIN')
      await hostage.query(`SELECT name FROM ${table} WHERE name = $1 FOR UPDATE`, [name])
      const runner = startCli([
        'run',
        '--url',
        POSTGRES_URL,
        '--table',
        table,
        '--name',
        name,
        '--lock-at-most-for',
        '1m',
        ...args,
      ])
      const waiting = async (): Promise<boolean> =>
        (
          await db.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND query LIKE $1`,
            [`%INSERT INTO ${table} %`],
          )
        ).rowCount! > 0
      expect(await waitFor(waiting, 15_000), runner.stderr()).toBe(true)
      runner.child.kill('SIGTERM')
      expect(await waitFor(() => runner.stderr().includes('SIGTERM'), 10_000), runner.stderr()).toBe(true)
      await hostage.query('ROLLBACK')
      return await runner.done
    } finally {
      hostage.release()
    }
  }

  it('SIGTERM while the lock is taken: exit 143, the command never starts, the slot is given back and a later run of it runs the command', async () => {
    const slot = '2026-11-25T02:00:00Z'
    const stopped = await stoppedWhileLocking('stopped', [
      '--slot',
      slot,
      '--',
      process.execPath,
      '-e',
      'console.log("ran")',
    ])
    expect(stopped).toMatchObject({
      code: 143,
      stdout: '',
      stderr: 'shedlock run: SIGTERM before the command started: the command will not be run\n',
    })
    expect((await inspector.get(slotRecordName('stopped', new Date(slot))))?.held ?? false).toBe(false)
    expect((await inspector.get('stopped'))?.held).toBe(false)
    const again = await run('stopped', slot, process.execPath, '-e', 'console.log("ran")')
    expect(again).toMatchObject({ code: 0, stdout: 'ran\n', stderr: '' })
    expect((await inspector.get(slotRecordName('stopped', new Date(slot))))?.held).toBe(true)
  })

  it('--json: one line with reason "stopped" and the signal', async () => {
    const slot = '2026-11-25T03:00:00Z'
    const stopped = await stoppedWhileLocking('stopped-json', [
      '--slot',
      slot,
      '--json',
      '--skipped-exit-code',
      '75',
      '--',
      'true',
    ])
    expect(stopped.code).toBe(143)
    expect(JSON.parse(stopped.stdout)).toEqual({
      skipped: true,
      reason: 'stopped',
      signal: 'SIGTERM',
      name: 'stopped-json',
      slot: '2026-11-25T03:00:00.000Z',
      lockedBy: null,
      lockedAt: null,
      lockUntil: null,
    })
    expect((await inspector.get(slotRecordName('stopped-json', new Date(slot))))?.held ?? false).toBe(false)
  })
})

describe('shedlock run --slot: usage errors before any store is touched', () => {
  it.each(['2026-11-24T02:00', 'yesterday', 'week', 'constructor', '2026-13-01T00:00:00Z'])('%s', async (slot) => {
    const result = await cli([
      'run',
      '--url',
      'postgres://nobody@127.0.0.1:1/none',
      '--name',
      'a',
      '--lock-at-most-for',
      '1m',
      '--slot',
      slot,
      '--',
      'true',
    ])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/^shedlock run: --slot: expected minute, hour, day or an ISO date-time with a zone/)
  })

  it('--help documents --slot', async () => {
    const help = await cli(['run', '--help'])
    expect(help.stdout).toContain('--slot minute|hour|day')
    expect(help.stdout).toContain('--slot ISO')
  })
})
