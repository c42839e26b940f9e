/**
 * cron (kelektiv/node-cron, the engine of @nestjs/schedule) + shedlock on a SQLite file: onTick
 * runs on one process each second; the others skip.
 *
 *   npm run example cron-sqlite        (start it in two or three terminals at once)
 *
 * Environment: SHEDLOCK_SQLITE (the file all processes share; default shedlock-example.db in the
 * temp folder), EXAMPLE_RUN_MS (stop after this long; default: run until Ctrl+C).
 */
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CronJob } from 'cron'
import { assertLocked, withLock } from 'shedlock'
import { sqliteLockProvider, sqliteSchema } from 'shedlock/sqlite'
import { openSqlite } from './support/open-sqlite.js'

const database = await openSqlite(process.env.SHEDLOCK_SQLITE ?? join(tmpdir(), 'shedlock-example.db')) // node:sqlite, or libsql on Node 20
database.exec(sqliteSchema())
const provider = sqliteLockProvider({ database })
const log = (message: string) => console.log(`[${process.pid}] ${new Date().toISOString().slice(11, 19)} ${message}`)

const report = withLock(
  provider,
  { name: 'example-cron-report', lockAtMostFor: '1m', lockAtLeastFor: '500ms' },
  async () => {
    assertLocked() // withLock runs the task inside the lock's async context
    log('ran the report')
    return 'done'
  },
)

const job = CronJob.from({
  cronTime: '* * * * * *',
  onTick: async () => {
    if ((await report()) === undefined) log('skipped: another process holds the lock')
  },
  // cron catches a rejected onTick (a LockProviderError when the store fails) and passes it here;
  // without errorHandler it logs it with console.error.
  errorHandler: (error) => log(`report failed: ${String(error)}`),
  start: true,
})

async function stop(): Promise<void> {
  await job.stop()
  await new Promise((resolve) => setTimeout(resolve, 300)) // let a run in progress release its lock
  database.close()
}
process.once('SIGINT', stop)
process.once('SIGTERM', stop)
if (process.env.EXAMPLE_RUN_MS) setTimeout(stop, Number(process.env.EXAMPLE_RUN_MS))
