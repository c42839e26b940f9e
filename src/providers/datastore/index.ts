// shedlock/datastore: the provider, the inspector, and the lock entities shared with Java ShedLock.
export type {
  DatastoreClient,
  DatastoreEntityWrite,
  DatastoreKey,
  DatastoreQuery,
  DatastoreTransaction,
} from './format.ts'
export { type DatastoreLockInspectorOptions, datastoreLockInspector } from './inspector.ts'
export { type DatastoreLockProviderOptions, datastoreLockProvider } from './provider.ts'
