import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { RunLedger } from '../../../src/index.ts'
import { openStore } from '../../../src/cli/open-store.ts'
import { parseStoreUrl } from '../../../src/cli/store-url.ts'
import { mysqlRunLedger, mysqlRunsSchema } from '../../../src/providers/mysql/index.ts'
import { postgresRunLedger, postgresRunsSchema } from '../../../src/providers/postgres/index.ts'
import { loadSqliteDriver } from '../../../src/providers/sqlite/driver.ts'
import { sqliteRunLedger, sqliteRunsSchema } from '../../../src/providers/sqlite/index.ts'
import { uniqueTable } from '../../helpers/backends.ts'
import { MYSQL_URL, mysqlPoolOrSkip, POSTGRES_URL, postgresPoolOrSkip } from '../../helpers/sql-pools.ts'

// A runs table as shedlock made it before `columns` (the later ones of today's DDL).
function without(ddl: string, columns: readonly string[]): string {
  return columns.reduce((text, column) => text.replace(new RegExp(`,\\n\\s*${column} [^\\n]*?(,?)\\n`), '$1\n'), ddl)
}

// Tables made before next_fire_at lack triggered_by too (columns are added at the end, in order).
const OLD_TABLES = [
  { before: 'next_fire_at', missing: ['next_fire_at', 'triggered_by'] },
  { before: 'triggered_by', missing: ['triggered_by'] },
] as const

interface Store {
  readonly name: string
  readonly url: string
  /** Runs the DDL of an old runs table named `table`, without `columns`. */
  create(table: string, columns: readonly string[]): Promise<void>
  ledger(table: string): RunLedger
  drop(table: string): Promise<void>
}

const pg = await postgresPoolOrSkip(2)
const my = await mysqlPoolOrSkip(2)
const sqlite = await loadSqliteDriver()
const dir = mkdtempSync(join(tmpdir(), 'shedlock-old-runs-'))
const sqliteFile = join(dir, 'locks.db')
const sqliteDb = sqlite.open(sqliteFile)
afterAll(async () => {
  await pg?.end()
  await my?.end()
  sqliteDb.close()
  rmSync(dir, { recursive: true, force: true })
})

const stores: Store[] = [
  {
    name: 'PostgreSQL',
    url: POSTGRES_URL,
    create: async (table, columns) =>
      void (await pg!.query(without(postgresRunsSchema({ tableName: table }), columns))),
    ledger: (table) => postgresRunLedger({ client: pg!, tableName: table }),
    drop: async (table) => void (await pg!.query(`DROP TABLE IF EXISTS ${table}`)),
  },
  {
    name: 'MariaDB',
    url: MYSQL_URL,
    create: async (table, columns) => void (await my!.query(without(mysqlRunsSchema({ tableName: table }), columns))),
    ledger: (table) => mysqlRunLedger({ client: my!, tableName: table }),
    drop: async (table) => void (await my!.query(`DROP TABLE IF EXISTS ${table}`)),
  },
  {
    name: `SQLite (${sqlite.name})`,
    url: `sqlite:${sqliteFile}`,
    create: async (table, columns) => void sqliteDb.exec(without(sqliteRunsSchema({ tableName: table }), columns)),
    ledger: (table) => sqliteRunLedger({ database: sqliteDb, tableName: table }),
    drop: async (table) => void sqliteDb.exec(`DROP TABLE IF EXISTS ${table}`),
  },
]

const run = (name: string, nextFireAt: Date) => {
  const at = new Date()
  return {
    name,
    slot: undefined,
    node: 'web-1',
    startedAt: at,
    finishedAt: at,
    outcome: 'ok' as const,
    durationMs: 1,
    nextFireAt,
    triggeredBy: 'alice',
  }
}

const available = stores.filter((s) => (s.name === 'PostgreSQL' ? pg : s.name === 'MariaDB' ? my : true))
describe.each(available.flatMap((store) => OLD_TABLES.map((old) => ({ ...store, ...old }))))(
  'a runs table made before $before, on $name',
  (store) => {
    it('the ledger records and reads runs without the columns, warns once, and shedlock init adds them', async () => {
      const table = uniqueTable('shedlock_old_runs')
      await store.create(table, store.missing)
      const warnings: string[] = []
      const onWarning = (warning: Error & { code?: string }) => {
        if (warning.code === 'SHEDLOCK_RUNS_TABLE_OLD') warnings.push(warning.message)
      }
      process.on('warning', onWarning)
      try {
        const old = store.ledger(table)
        const next = new Date('2030-01-01T00:00:00.000Z')
        await old.record(run('old-task', next))
        await old.record(run('old-task', next))
        const [read] = await old.history('old-task')
        expect(read?.outcome).toBe('ok')
        expect(read?.triggeredBy).toBeUndefined()
        if (store.before === 'next_fire_at') expect(read?.nextFireAt).toBeUndefined()
        else expect(read?.nextFireAt?.toISOString()).toBe('2030-01-01T00:00:00.000Z')
        // emitWarning() delivers on the next tick.
        await new Promise((resolve) => setImmediate(resolve))
        expect(warnings).toHaveLength(1)
        expect(warnings[0]).toContain(`shedlock init --runs-table ${table}`)
        expect(warnings[0]).toContain(`has no ${store.missing.join(' or ')} column`)

        const admin = await openStore(parseStoreUrl(store.url), { runsTable: table })
        try {
          expect(await admin.runsTable!.missingColumns()).toEqual(store.missing)
          const added = (await admin.init()).join('\n')
          for (const column of store.missing) expect(added).toContain(`added column ${column} to table ${table}`)
          expect(await admin.runsTable!.missingColumns()).toEqual([])
          expect((await admin.init()).join('\n')).toContain(
            `table ${table} (run history) already exists: nothing to do`,
          )
        } finally {
          await admin.close()
        }
        const upgraded = store.ledger(table)
        await upgraded.record(run('old-task', next))
        const runs = await upgraded.history('old-task')
        expect(runs.map((r) => r.triggeredBy ?? null).sort()).toEqual(['alice', null, null])
        const nextFire = store.before === 'next_fire_at' ? null : '2030-01-01T00:00:00.000Z'
        expect(runs.map((r) => r.nextFireAt?.toISOString() ?? null).sort()).toEqual(
          ['2030-01-01T00:00:00.000Z', nextFire, nextFire].sort(),
        )
      } finally {
        process.off('warning', onWarning)
        await store.drop(table)
      }
    })
  },
)
