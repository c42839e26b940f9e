/**
 * croner + shedlock on a SQLite file: the job runs on one process each second; the others skip.
 *
 *   npm run example croner-sqlite        (start it in two or three terminals at once)
 *
 * Environment: SHEDLOCK_SQLITE (the file all processes share; default shedlock-example.db in the
 * temp folder), EXAMPLE_RUN_MS (stop after this long; default: run until Ctrl+C).
 */
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Cron } from 'croner'
import { withLock } from 'shedlock'
import { sqliteLockProvider, sqliteSchema } from 'shedlock/sqlite'
import { openSqlite } from './support/open-sqlite.js'

const database = await openSqlite(process.env.SHEDLOCK_SQLITE ?? join(tmpdir(), 'shedlock-example.db')) // node:sqlite, or libsql on Node 20
database.exec(sqliteSchema())
const provider = sqliteLockProvider({ database })
const log = (message: string) => console.log(`[${process.pid}] ${new Date().toISOString().slice(11, 19)} ${message}`)

const report = withLock(
  provider,
  {
    name: 'example-croner-report',
    lockAtMostFor: '1m', // frees the lock if this process dies mid-run
    lockAtLeastFor: '500ms', // below the 1 s period: a node whose timer is a little late skips the same tick
    // croner does not catch a rejected job: the rejection would end the process. Log it instead.
    onError: (error) => log(`report failed: ${String(error)}`),
  },
  async () => {
    log('ran the report')
    return 'done'
  },
)

const job = new Cron('* * * * * *', async () => {
  if ((await report()) === undefined) log('skipped: another process holds the lock')
})

async function stop(): Promise<void> {
  job.stop()
  await new Promise((resolve) => setTimeout(resolve, 300)) // let a run in progress release its lock
  database.close()
}
process.once('SIGINT', stop)
process.once('SIGTERM', stop)
if (process.env.EXAMPLE_RUN_MS) setTimeout(stop, Number(process.env.EXAMPLE_RUN_MS))
