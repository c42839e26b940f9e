// shedlock/firestore: the provider, the inspector, and the lock documents shared with Java ShedLock.
export type {
  FirestoreDocument,
  FirestoreLockCollection,
  FirestorePrecondition,
  FirestoreSnapshot,
} from './client.ts'
export { firestoreDocumentId, firestoreLockName } from './format.ts'
export { type FirestoreLockInspectorOptions, firestoreLockInspector } from './inspector.ts'
export { type FirestoreLockProviderOptions, firestoreLockProvider } from './provider.ts'
