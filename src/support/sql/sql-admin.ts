import type { LockInspector } from '../../core/lock-inspector.ts'
import { type ExtensibleLockProvider, type LockProvider, lockPairOf, withLockPair } from '../../core/lock-provider.ts'
import type { RunLedger } from '../../core/run-ledger.ts'
import { type Check, type ClockReading, type StoreAdmin, withInitAdvice } from '../store-admin.ts'
import { addRunColumnDdl, LATER_RUN_COLUMNS, type LaterRunColumn, type RunColumnTypes } from './sql-run-ledger.ts'
import type { SqlTable } from './sql-table.ts'

/** A column of the lock table as the database's catalog describes it. */
export interface SqlColumn {
  readonly name: string
  /** The catalog's type name, lower case. */
  readonly type: string
}

/**
 * What one SQL database contributes to its {@link StoreAdmin}, beyond the provider and the
 * inspector over the same connection. Statements use `?` placeholders; a dialect with other
 * placeholders rewrites them in `query` and `execute`.
 */
export interface SqlAdminDialect {
  readonly kind: string
  readonly where: string
  readonly table: SqlTable
  readonly inspector: LockInspector
  /** The run history, in its own table. */
  readonly runLedger: RunLedger
  /** The runs table's name, for init's lines. */
  readonly runsTable: string
  /** Whether the runs table exists. */
  runsTableExists(): Promise<boolean>
  /** The DDL of the runs table (one or more statements, each ending with `;`). */
  runsSchema(): string
  /** The runs table's nullable column type of each kind of the columns later versions add (e.g. `{ timestamp: 'TIMESTAMP NULL', text: 'VARCHAR(255) NULL' }`). */
  readonly runsColumnTypes: RunColumnTypes
  /**
   * The table's provider; `fencingTokens`: whether it counts tokens in the fencing column (see
   * `fencingTokens`); `lockedBy`: its holders' prefix (default: the host name).
   */
  provider(fencingTokens: boolean, lockedBy: string | undefined): LockProvider
  /** Rows of a `SELECT`. */
  query(sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]>
  /** Rows matched by an `UPDATE` or `DELETE`, or 0 for DDL. */
  execute(sql: string, params: readonly unknown[]): Promise<number>
  tableExists(): Promise<boolean>
  /** The table's columns, in catalog order. */
  columns(): Promise<SqlColumn[]>
  /** The primary key's columns, in key order; empty when there is none. */
  primaryKey(): Promise<string[]>
  /** Type names accepted for each kind of column; anything else is a warning. */
  readonly expectedTypes: {
    readonly name: readonly string[]
    readonly time: readonly string[]
    readonly lockedBy: readonly string[]
  }
  /** The DDL of `shedlock schema` for this table. */
  schema(): string
  /** The `ALTER TABLE` that adds the fencing token column (see `fencingTokens`). */
  fencingColumnDdl(): string
  /** The `shedlock init` command line that creates the table, for advice. */
  readonly initCommand: string
  version(): Promise<string>
  readClock(): Promise<ClockReading | string>
  readonly clockDependence: string
  close(): Promise<void>
}

/**
 * The table's provider, with fencing tokens if the table has the fencing column: read once, at
 * the first `lock()` (one catalog query); a failed read counts as no column, and the acquire
 * statement then reports what is wrong with the table.
 */
function tokensWhereCounted(
  dialect: SqlAdminDialect,
  hasColumn: () => Promise<boolean>,
  lockedBy: string | undefined,
): ExtensibleLockProvider {
  const plain = dialect.provider(false, lockedBy) as ExtensibleLockProvider
  let chosen: Promise<ExtensibleLockProvider> | undefined
  const choose = (): Promise<ExtensibleLockProvider> =>
    (chosen ??= hasColumn().then(
      (present) => (present ? (dialect.provider(true, lockedBy) as ExtensibleLockProvider) : plain),
      () => plain,
    ))
  const provider: ExtensibleLockProvider = {
    name: plain.name,
    lock: async (configuration) => (await choose()).lock(configuration),
    ...(plain.inspector ? { inspector: () => plain.inspector!() } : {}),
  }
  // A slot run's paired acquire (PostgreSQL's one statement), with or without tokens alike.
  if (!lockPairOf(plain)) return provider
  return withLockPair(provider, async (first, second) => lockPairOf(await choose())!(first, second))
}

/**
 * The columns of {@link LATER_RUN_COLUMNS} the existing runs table lacks: a column whose `SELECT`
 * is refused is missing (one probe each, which any SQL store answers).
 */
async function missingRunColumns(dialect: SqlAdminDialect): Promise<LaterRunColumn[]> {
  const missing: LaterRunColumn[] = []
  for (const column of LATER_RUN_COLUMNS) {
    try {
      await dialect.query(`SELECT ${column.name} FROM ${dialect.runsTable} WHERE 1 = 0`, [])
    } catch {
      missing.push(column)
    }
  }
  return missing
}

/** Adds the later columns the existing runs table lacks; one line each. */
async function upgradeRunsTable(dialect: SqlAdminDialect): Promise<string[]> {
  const lines: string[] = []
  for (const column of await missingRunColumns(dialect)) {
    const ddl = addRunColumnDdl(dialect.runsTable, column, dialect.runsColumnTypes)
    await dialect.execute(ddl.replace(/;$/, ''), [])
    lines.push(`added column ${column.name} to table ${dialect.runsTable} (run history): ${ddl}`)
  }
  return lines
}

/** The {@link StoreAdmin} of a SQL database: the table's creation and checks; locks are read through the inspector. */
export function sqlStoreAdmin(dialect: SqlAdminDialect): StoreAdmin {
  const { table: t } = dialect
  const { name, lockUntil, lockedAt, lockedBy } = t.columns
  const hasFencingColumn = async (): Promise<boolean> =>
    (await dialect.columns()).some((c) => c.name.toLowerCase() === t.fencingColumn.toLowerCase())

  return {
    kind: dialect.kind,
    where: dialect.where,
    extensible: true,
    // Tokens wherever the table can count them: asked for (--fencing-tokens), or the column is
    // there (shedlock init --fencing-tokens made it), so that shedlock run hands them out.
    provider: (options) =>
      t.fencing
        ? dialect.provider(true, options?.lockedBy)
        : tokensWhereCounted(dialect, hasFencingColumn, options?.lockedBy),
    // A missing table gets doctor's advice (shedlock init), not the provider's CREATE TABLE.
    inspector: withInitAdvice(
      dialect.inspector,
      async () => !(await dialect.tableExists().catch(() => true)),
      `table ${t.table} does not exist; create it with: ${dialect.initCommand}`,
    ),
    runLedger: dialect.runLedger,
    runLedgerReady: () => dialect.runsTableExists(),
    runsTable: {
      name: dialect.runsTable,
      exists: () => dialect.runsTableExists(),
      initCommand: `${dialect.initCommand} --runs-table ${dialect.runsTable}`,
      missingColumns: async () => (await missingRunColumns(dialect)).map((column) => column.name),
    },
    async init() {
      const lines: string[] = []
      if (await dialect.tableExists()) {
        if (t.fencing && !(await hasFencingColumn())) {
          // Asked for: a nullable column, which Java ShedLock's statements leave alone.
          await dialect.execute(dialect.fencingColumnDdl().replace(/;$/, ''), [])
          lines.push(`added column ${t.fencingColumn} to table ${t.table}: ${dialect.fencingColumnDdl()}`)
        } else lines.push(`table ${t.table} already exists: nothing to do (shedlock doctor checks its columns)`)
      } else {
        await dialect.execute(dialect.schema(), [])
        lines.push(`created table ${t.table}`)
      }
      if (await dialect.runsTableExists()) {
        const added = await upgradeRunsTable(dialect)
        lines.push(
          ...(added.length > 0 ? added : [`table ${dialect.runsTable} (run history) already exists: nothing to do`]),
        )
      } else {
        // One statement at a time: not every driver takes several in one call.
        for (const statement of dialect
          .runsSchema()
          .split(/;\n?/)
          .filter((s) => s.trim() !== ''))
          await dialect.execute(statement, [])
        lines.push(`created table ${dialect.runsTable} (run history)`)
      }
      return lines
    },
    ping: () => dialect.version(),
    async structure(): Promise<Check[]> {
      if (!(await dialect.tableExists())) {
        return [
          {
            status: 'fail',
            label: `table ${t.table}`,
            detail: `does not exist; create it with: ${dialect.initCommand}`,
          },
        ]
      }
      const columns = await dialect.columns()
      const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]))
      const expected = Object.values(t.columns)
      const missing = expected.filter((c) => !byName.has(c.toLowerCase()))
      if (missing.length > 0) {
        return [
          {
            status: 'fail',
            label: `table ${t.table}`,
            detail: `lacks the column${missing.length === 1 ? '' : 's'} ${missing.join(', ')} (it has ${columns.map((c) => c.name).join(', ') || 'none'}); shedlock needs ${expected.join(', ')}, see: shedlock schema`,
          },
        ]
      }
      const checks: Check[] = []
      const key = (await dialect.primaryKey()).map((c) => c.toLowerCase())
      const keyOk = key.length === 1 && key[0] === name.toLowerCase()
      checks.push({
        status: keyOk ? 'ok' : 'fail',
        label: `table ${t.table}`,
        detail: keyOk
          ? `columns ${expected.map((c) => `${c} ${byName.get(c.toLowerCase())!.type}`).join(', ')}; primary key (${name})`
          : `the primary key is ${key.length === 0 ? 'missing' : `(${key.join(', ')})`}, but must be (${name}) alone: the lock upsert finds the row by it`,
      })
      const wrongTypes = (
        [
          [name, dialect.expectedTypes.name],
          [lockUntil, dialect.expectedTypes.time],
          [lockedAt, dialect.expectedTypes.time],
          [lockedBy, dialect.expectedTypes.lockedBy],
        ] as const
      ).filter(([column, types]) => !types.includes(byName.get(column.toLowerCase())!.type))
      const fencingColumn = byName.get(t.fencingColumn.toLowerCase())
      if (fencingColumn) {
        checks.push({
          status: 'ok',
          label: 'fencing tokens',
          detail: `column ${t.fencingColumn} ${fencingColumn.type}: providers with fencingTokens: true count tokens in it`,
        })
      } else if (t.fencing) {
        checks.push({
          status: 'fail',
          label: 'fencing tokens',
          detail: `table ${t.table} has no ${t.fencingColumn} column, which fencingTokens: true needs; add it with: ${dialect.fencingColumnDdl()} (or: ${dialect.initCommand})`,
        })
      }
      if (wrongTypes.length > 0) {
        checks.push({
          status: 'warn',
          label: 'column types',
          detail: `${wrongTypes.map(([column, types]) => `${column} is ${byName.get(column.toLowerCase())!.type}, expected ${types.join(' or ')}`).join('; ')} (see: shedlock schema)`,
        })
      }
      return checks
    },
    async remove(lockName) {
      await dialect.execute(`DELETE FROM ${t.table} WHERE ${name} = ?`, [lockName])
    },
    readClock: () => dialect.readClock(),
    clockDependence: dialect.clockDependence,
    close: () => dialect.close(),
  }
}
