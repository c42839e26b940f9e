// shedlock/mysql: the provider, the lock table's DDL and the inspector (MySQL 8, MariaDB 10.5+).
export { type MysqlLockInspectorOptions, mysqlLockInspector } from './inspector.ts'
export { type MysqlClient, type MysqlLockProviderOptions, type MysqlQueryable, mysqlLockProvider } from './provider.ts'
export { type MysqlRunLedgerOptions, mysqlRunLedger } from './run-ledger.ts'
export { type MysqlColumnType, mysqlFencingColumnDdl, mysqlRunsSchema, mysqlSchema } from './table.ts'
export type { SqlRunLedgerOptions } from '../../support/sql/sql-run-ledger.ts'
export type { SqlColumnNames, SqlTableOptions } from '../../support/sql/sql-table.ts'
