// shedlock/datastore: the provider, the inspector, the lock entities shared with Java ShedLock, and the run ledger.
export type {
  DatastoreClient,
  DatastoreEntityWrite,
  DatastoreKey,
  DatastoreQuery,
  DatastoreTransaction,
} from './format.ts'
export { type DatastoreLockInspectorOptions, datastoreLockInspector } from './inspector.ts'
export { type DatastoreLockProviderOptions, datastoreLockProvider } from './provider.ts'
export {
  type DatastoreRunLedgerOptions,
  type DatastoreRunQuery,
  type DatastoreRunsClient,
  datastoreRunLedger,
  type UnindexedEntity,
} from './run-ledger.ts'
