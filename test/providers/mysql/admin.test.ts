import { afterAll, describe } from 'vitest'
import { mysqlLockProvider } from '../../../src/providers/mysql/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { cliProof } from '../../cli/support/proof.ts'
import { MYSQL_URL, mysqlPoolOrSkip } from '../../helpers/sql-pools.ts'

const url = MYSQL_URL
const pool = await mysqlPoolOrSkip(4)

describe.skipIf(!pool)('shedlock CLI on MariaDB/MySQL (the built bin)', () => {
  const db = pool!
  const table = uniqueTable('shedlock_cli')
  const fresh = `${table}_init`
  afterAll(async () => {
    await db.query(`DROP TABLE IF EXISTS ${table}`)
    await db.query(`DROP TABLE IF EXISTS ${fresh}`)
    await db.query(`DROP TABLE IF EXISTS ${fresh}_runs`)
    await db.end()
  })
  // mariadb:// is the same store as mysql://.
  const cliUrl = url.replace(/^mysql:/, 'mariadb:')
  const wrong = new URL(url)
  wrong.password = 'my-s3cret-Pa55'

  cliProof({
    kind: /^(MariaDB|MySQL) /,
    args: ['--url', cliUrl, '--table', table],
    provider: () => mysqlLockProvider({ client: db, tableName: table }),
    isHeld: async (name) => {
      const [rows] = await db.query(`SELECT 1 FROM ${table} WHERE name = ? AND lock_until > UTC_TIMESTAMP(3)`, [name])
      return (rows as unknown[]).length === 1
    },
    init: {
      args: ['--url', cliUrl, '--table', fresh, '--runs-table', `${fresh}_runs`],
      first: new RegExp(`: created table ${fresh}\\n.*: created table ${fresh}_runs \\(run history\\)\\n$`),
      again: new RegExp(
        `: table ${fresh} already exists: nothing to do.*\\n.*: table ${fresh}_runs \\(run history\\) already exists: nothing to do\\n$`,
      ),
    },
    missingLayout: {
      args: ['--url', cliUrl, '--table', `${table}_missing`],
      advice: new RegExp(`create it with: shedlock init --url \\S+ --table ${table}_missing`),
    },
    wrongPassword: { url: wrong.toString(), password: wrong.password, message: /Access denied for user/ },
  })
})
