// shedlock/sqlite: the provider, the lock table's DDL and the inspector.
export {
  type SqliteLockInspectorOptions,
  type SqliteRowsDatabase,
  type SqliteRowsStatement,
  sqliteLockInspector,
} from './inspector.ts'
export {
  type SqliteDatabase,
  type SqliteLockProviderOptions,
  type SqliteStatement,
  sqliteLockProvider,
} from './provider.ts'
export { type SqliteRunLedgerOptions, sqliteRunLedger } from './run-ledger.ts'
export { sqliteFencingColumnDdl, sqliteRunsSchema, sqliteSchema } from './table.ts'
export type { SqlRunLedgerOptions } from '../../support/sql/sql-run-ledger.ts'
export type { SqlColumnNames, SqlTableOptions } from '../../support/sql/sql-table.ts'
