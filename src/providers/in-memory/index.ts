// The in-memory provider and its inspector, exported from the package root.
export { inMemoryLockInspector } from './inspector.ts'
export {
  type InMemoryLockProvider,
  type InMemoryLockProviderOptions,
  type InMemoryLockRecord,
  inMemoryLockProvider,
} from './provider.ts'
export { type InMemoryRunLedgerOptions, inMemoryRunLedger } from './run-ledger.ts'
