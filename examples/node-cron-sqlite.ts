/**
 * node-cron 4 + shedlock on a SQLite file, through node-cron's run coordinator: each second the
 * task runs on one process; the others report `execution:skipped` ('not-elected').
 *
 *   npm run example node-cron-sqlite        (start it in two or three terminals at once)
 *
 * Environment: SHEDLOCK_SQLITE (the file all processes share; default shedlock-example.db in the
 * temp folder), EXAMPLE_RUN_MS (stop after this long; default: run until Ctrl+C).
 */
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import cron from 'node-cron'
import { lockingTaskOptions } from 'shedlock/node-cron'
import { sqliteLockProvider, sqliteSchema } from 'shedlock/sqlite'
import { openSqlite } from './support/open-sqlite.js'

const database = await openSqlite(process.env.SHEDLOCK_SQLITE ?? join(tmpdir(), 'shedlock-example.db')) // node:sqlite, or libsql on Node 20
database.exec(sqliteSchema())
const provider = sqliteLockProvider({ database })
const log = (message: string) => console.log(`[${process.pid}] ${new Date().toISOString().slice(11, 19)} ${message}`)

const task = cron.schedule(
  '* * * * * *',
  () => {
    // The task runs outside the lock's async context: assertLocked() would throw here.
    log('ran the report')
  },
  {
    // name, distributed: true, the run coordinator and distributedLease, from one lock definition.
    ...lockingTaskOptions(provider, { name: 'example-node-cron-report', lockAtMostFor: '1m', lockAtLeastFor: '500ms' }),
    noOverlap: true,
  },
)
// 'not-elected': another process runs this fire. 'coordinator-error': the store failed, so the
// fire was skipped (fail closed) and node-cron logged the error.
task.on('execution:skipped', (context) => log(`skipped: ${context.reason}`))

async function stop(): Promise<void> {
  await task.destroy()
  await new Promise((resolve) => setTimeout(resolve, 300)) // let a run in progress release its lock
  database.close()
}
process.once('SIGINT', stop)
process.once('SIGTERM', stop)
if (process.env.EXAMPLE_RUN_MS) setTimeout(stop, Number(process.env.EXAMPLE_RUN_MS))
