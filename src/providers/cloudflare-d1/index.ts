// shedlock/cloudflare-d1: the provider, the lock table's DDL, the parts of a D1 binding it calls, and the inspector.
export { type D1LockInspectorOptions, d1LockInspector } from './inspector.ts'
export { type D1LockProviderOptions, d1LockProvider } from './provider.ts'
export {
  type D1LockDatabase,
  type D1LockStatement,
  type D1RowsResult,
  type D1RunResult,
  d1FencingColumnDdl,
  d1Schema,
} from './table.ts'
export type { SqlColumnNames, SqlTableOptions } from '../../support/sql/sql-table.ts'
