// shedlock/spanner: the provider, the inspector, the run history and the lock table shared with Java ShedLock.
export { type SpannerLockInspectorOptions, spannerLockInspector } from './inspector.ts'
export { type SpannerLockProviderOptions, spannerLockProvider } from './provider.ts'
export { type SpannerRunLedgerOptions, spannerRunLedger, spannerRunsSchema } from './run-ledger.ts'
export {
  type SpannerDatabase,
  type SpannerStatement,
  type SpannerTransaction,
  spannerFencingColumnDdl,
  spannerSchema,
} from './format.ts'
export type { SqlRunLedgerOptions } from '../../support/sql/sql-run-ledger.ts'
export type { SqlColumnNames, SqlTableOptions } from '../../support/sql/sql-table.ts'
