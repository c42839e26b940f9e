import mysql from 'mysql2/promise'
import {
  type MysqlClient,
  mysqlLockProvider,
  mysqlRunLedger,
  mysqlRunsSchema,
  mysqlSchema,
} from '../../src/providers/mysql/index.ts'
import { type CountSpec, countingProxy } from '../counting.ts'
import {
  chunks,
  packageVersion,
  type RawOperations,
  rawOwner,
  redactUrl,
  type SetupContext,
  type StoreSetup,
} from './setup.ts'

const COUNT: CountSpec = { count: ['query'] }
const NOW = 'UTC_TIMESTAMP(3)'
// The provider's marker for "found the row held" (see src/providers/mysql.ts).
const MARK = 1_518_500_249
const POOL_SIZE = 20

/** The provider's statements (database time, the default), issued through `client.query` directly. */
function rawMysql(client: MysqlClient, table: string): RawOperations {
  const expired = `lock_until <= ${NOW}`
  const until = `TIMESTAMPADD(MICROSECOND, ?, ${NOW})`
  const acquire =
    `INSERT INTO ${table} (name, lock_until, locked_at, locked_by) VALUES (?, ${until}, ${NOW}, ?) ` +
    `ON DUPLICATE KEY UPDATE locked_by = IF(${expired}, ?, IF(LAST_INSERT_ID(${MARK}) = ${MARK}, locked_by, locked_by)), ` +
    `locked_at = IF(${expired}, ${NOW}, locked_at), ` +
    `lock_until = IF(${expired}, ${until}, lock_until)`
  const release = `UPDATE ${table} SET lock_until = GREATEST(TIMESTAMPADD(MICROSECOND, ?, locked_at), ${NOW}) WHERE name = ? AND locked_by = ?`
  return {
    async acquire(name) {
      const owner = rawOwner()
      const [result] = (await client.query(acquire, [name, 60_000_000, owner, owner, 60_000_000])) as [
        { affectedRows: number; insertId: number },
        unknown,
      ]
      if (result.affectedRows === 0 || Number(result.insertId) === MARK) return undefined
      return {
        async release() {
          await client.query(release, [0, name, owner])
        },
      }
    },
  }
}

async function openPool(url: string, connectionLimit: number): Promise<mysql.Pool> {
  const pool = mysql.createPool({ uri: url, connectionLimit })
  try {
    await pool.query('SELECT 1')
  } catch (error) {
    await pool.end()
    throw error
  }
  return pool
}

/** MariaDB or MySQL at `SHEDLOCK_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`), through a mysql2 promise Pool. */
export async function mysqlSetup(context: SetupContext): Promise<StoreSetup> {
  const url = process.env.SHEDLOCK_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
  const pool = await openPool(url, POOL_SIZE)
  const tables: string[] = []
  const newTable = async (suffix: string): Promise<string> => {
    const table = `shedlock_bench_${context.runId}_${suffix}`
    tables.push(table)
    await pool.query(mysqlSchema({ tableName: table }))
    return table
  }
  const table = await newTable('main')
  const runs = `${table}_runs`
  tables.push(runs)
  await pool.query(mysqlRunsSchema({ tableName: runs }))
  const [rows] = (await pool.query('SELECT VERSION() AS version')) as [{ version: string }[], unknown]

  return {
    name: 'mysql',
    versions: {
      server: String(rows[0]?.version),
      client: `mysql2 ${packageVersion('mysql2')}, promise Pool of ${POOL_SIZE}`,
      url: redactUrl(url),
    },
    notes: [],
    provider: mysqlLockProvider({ client: pool, tableName: table }),
    raw: rawMysql(pool, table),
    counted() {
      const { client, counter } = countingProxy(pool, COUNT)
      return {
        provider: mysqlLockProvider({ client, tableName: table }),
        raw: rawMysql(client, table),
        counter,
        runLedger: mysqlRunLedger({ client, tableName: runs }),
      }
    },
    async separateNode() {
      const own = await openPool(url, 1)
      const { client, counter } = countingProxy(own, COUNT)
      return { provider: mysqlLockProvider({ client, tableName: table }), counter, close: () => own.end() }
    },
    scaleMode: 'separate',
    async scaleSpace(label) {
      const spaceTable = await newTable(label)
      return {
        provider: mysqlLockProvider({ client: pool, tableName: spaceTable }),
        async fill(names) {
          for (const slice of chunks(names, 1000)) {
            const values = slice.map(() => `(?, TIMESTAMPADD(HOUR, 1, ${NOW}), ${NOW}, 'another-node')`).join(', ')
            await pool.query(
              `INSERT INTO ${spaceTable} (name, lock_until, locked_at, locked_by) VALUES ${values}`,
              slice,
            )
          }
          await pool.query(`ANALYZE TABLE ${spaceTable}`)
        },
        async drain() {
          await pool.query(`TRUNCATE TABLE ${spaceTable}`)
        },
      }
    },
    async close() {
      try {
        for (const t of tables) await pool.query(`DROP TABLE IF EXISTS ${t}`)
      } finally {
        await pool.end()
      }
    },
  }
}
