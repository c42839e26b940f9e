// shedlock/firestore: the provider, the inspector, the lock documents shared with Java ShedLock, and the run ledger.
export type {
  FirestoreDocument,
  FirestoreLockCollection,
  FirestorePrecondition,
  FirestoreSnapshot,
} from './client.ts'
export { firestoreDocumentId, firestoreLockName } from './format.ts'
export { type FirestoreLockInspectorOptions, firestoreLockInspector } from './inspector.ts'
export { type FirestoreLockProviderOptions, firestoreLockProvider } from './provider.ts'
export {
  type FirestoreRunLedgerOptions,
  type FirestoreRunQuery,
  type FirestoreRunSnapshot,
  type FirestoreRunsCollection,
  type FirestoreRunsOfTask,
  type FirestoreTaskDocument,
  type FirestoreWriteBatch,
  firestoreRunLedger,
} from './run-ledger.ts'
