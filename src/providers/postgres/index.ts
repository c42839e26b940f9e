// shedlock/postgres: the provider, the lock table's DDL and the inspector.
export {
  type PostgresLockInspectorOptions,
  type PostgresRowsClient,
  type PostgresRowsQueryable,
  postgresLockInspector,
} from './inspector.ts'
export {
  type PostgresClient,
  type PostgresLockProviderOptions,
  type PostgresQueryable,
  postgresLockProvider,
} from './provider.ts'
export { type PostgresRunLedgerOptions, postgresRunLedger } from './run-ledger.ts'
export type { SqlRunLedgerOptions } from '../../support/sql/sql-run-ledger.ts'
export { postgresFencingColumnDdl, postgresRunsSchema, postgresSchema } from './table.ts'
export type { SqlColumnNames, SqlTableOptions } from '../../support/sql/sql-table.ts'
