/**
 * node-schedule + shedlock on a SQLite file: the job runs on one process each second; the others
 * skip.
 *
 *   npm run example node-schedule-sqlite        (start it in two or three terminals at once)
 *
 * Environment: SHEDLOCK_SQLITE (the file all processes share; default shedlock-example.db in the
 * temp folder), EXAMPLE_RUN_MS (stop after this long; default: run until Ctrl+C).
 */
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import schedule from 'node-schedule'
import { withLock } from 'shedlock'
import { sqliteLockProvider, sqliteSchema } from 'shedlock/sqlite'
import { openSqlite } from './support/open-sqlite.js'

const database = await openSqlite(process.env.SHEDLOCK_SQLITE ?? join(tmpdir(), 'shedlock-example.db')) // node:sqlite, or libsql on Node 20
database.exec(sqliteSchema())
const provider = sqliteLockProvider({ database })
const log = (message: string) => console.log(`[${process.pid}] ${new Date().toISOString().slice(11, 19)} ${message}`)

// withLock passes node-schedule's argument (the fire date) through to the task.
const report = withLock(
  provider,
  { name: 'example-node-schedule-report', lockAtMostFor: '1m', lockAtLeastFor: '500ms' },
  async (fireDate: Date) => {
    log(`ran the report of ${fireDate.toISOString().slice(11, 19)}`)
    return 'done'
  },
)

const job = schedule.scheduleJob('* * * * * *', async (fireDate) => {
  if ((await report(fireDate)) === undefined) log('skipped: another process holds the lock')
})
// node-schedule emits a rejected job (a LockProviderError when the store fails) as 'error'; an
// EventEmitter without an 'error' listener throws, which would end the process.
job.on('error', (error) => log(`report failed: ${String(error)}`))

async function stop(): Promise<void> {
  // Not schedule.gracefulShutdown(): when a job is running, node-schedule 2.1 leaves a setInterval
  // behind and the process never exits.
  job.cancel()
  await new Promise((resolve) => setTimeout(resolve, 300)) // let a run in progress release its lock
  database.close()
}
process.once('SIGINT', stop)
process.once('SIGTERM', stop)
if (process.env.EXAMPLE_RUN_MS) setTimeout(stop, Number(process.env.EXAMPLE_RUN_MS))
