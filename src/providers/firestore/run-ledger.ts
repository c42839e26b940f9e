import { LockConfigurationError } from '../../core/errors.ts'
import type { RunLedger } from '../../core/run-ledger.ts'
import {
  type DocumentRunLedgerOptions,
  documentRunLedger,
  type RunDocuments,
  type TaskDocument,
} from '../../support/document-run-ledger.ts'
import type { FirestoreDocument, FirestoreSnapshot } from './client.ts'
import {
  CODE,
  collectionLabel,
  describeFirestoreError,
  firestoreDocumentId,
  firestoreLockName,
  hasCode,
  millisOf,
  PROVIDER,
} from './format.ts'

// The part of @google-cloud/firestore (7 and 8) the run ledger calls: pass
// `firestore.collection('shedlock_runs')` as it is.

/** A read of a task's runs: the part of a `Query` of `@google-cloud/firestore` the ledger calls. */
export interface FirestoreRunQuery {
  limit(count: number): FirestoreRunQuery
  /** With no field: the documents' ids only. */
  select(...fields: string[]): FirestoreRunQuery
  get(): Promise<{ readonly docs: readonly FirestoreRunSnapshot[] }>
}

/** A run document as read: the part of a `QueryDocumentSnapshot` the ledger reads. */
export interface FirestoreRunSnapshot {
  readonly id: string
  data(): Record<string, unknown> | undefined
}

/** A task's runs: the subcollection `runs` of its document (a `CollectionReference`). */
export interface FirestoreRunsOfTask extends FirestoreRunQuery {
  doc(id: string): object
}

/** A task's document (a `DocumentReference`), with its runs beneath it. */
export interface FirestoreTaskDocument extends FirestoreDocument {
  collection(id: string): FirestoreRunsOfTask
}

/** One commit of several writes: the part of a `WriteBatch` the ledger calls. */
export interface FirestoreWriteBatch {
  set(document: object, data: Record<string, unknown>): unknown
  delete(document: object): unknown
  commit(): Promise<unknown>
}

/**
 * The runs collection: a `CollectionReference` of `@google-cloud/firestore`, e.g.
 * `firestore.collection('shedlock_runs')`; not the lock collection.
 */
export interface FirestoreRunsCollection {
  /** The collection's id, for error messages only. */
  readonly id: string
  /** The client the collection belongs to (its batches). */
  readonly firestore: { batch(): FirestoreWriteBatch }
  doc(id: string): FirestoreTaskDocument
  get(): Promise<{ readonly docs: readonly FirestoreSnapshot[] }>
}

/** Options of {@link firestoreRunLedger}. */
export interface FirestoreRunLedgerOptions extends DocumentRunLedgerOptions {
  /**
   * The runs collection, e.g. `new Firestore().collection('shedlock_runs')`: apart from the lock
   * collection, whose documents are read as locks. Nothing needs creating.
   */
  collection: FirestoreRunsCollection
}

/** The subcollection of a task's document that holds its runs. */
export const RUNS_SUBCOLLECTION = 'runs'

/**
 * The run history in Firestore, apart from the lock collection: one document per task (its id
 * the lock's document id, with the fields `name` and `lastStartedAt`), and beneath it, in the
 * subcollection `runs`, one document per run, whose id sorts newest first. Reads follow document
 * ids, which Firestore indexes by itself: no composite index to create, nothing to set up.
 * `record()` is one batch of two writes; a long run's `finish()` one write.
 *
 * ```ts
 * const firestore = new Firestore()
 * const runLedger = firestoreRunLedger({ collection: firestore.collection('shedlock_runs') })
 * const executor = createLockingTaskExecutor(
 *   firestoreLockProvider({ collection: firestore.collection('shedlock') }),
 *   { runLedger },
 * )
 * ```
 *
 * @throws LockConfigurationError when `collection` is not a CollectionReference, or for a bad `keep`, `maxAge`, `pruneDelay` or `timeout`.
 */
export function firestoreRunLedger(options: FirestoreRunLedgerOptions): RunLedger {
  const { collection } = options ?? {}
  const candidate = collection as Partial<FirestoreRunsCollection> | undefined
  if (typeof candidate?.doc !== 'function' || typeof candidate.firestore?.batch !== 'function') {
    throw new LockConfigurationError(
      `${PROVIDER}: pass the runs collection as { collection }, e.g. new Firestore().collection('shedlock_runs') (a CollectionReference; not the lock collection)`,
    )
  }
  const where = collectionLabel(collection)
  return documentRunLedger(firestoreRunDocuments(collection, where), options, describeFirestoreError(where))
}

function firestoreRunDocuments(collection: FirestoreRunsCollection, where: string): RunDocuments {
  const task = (name: string): FirestoreTaskDocument => collection.doc(firestoreDocumentId(name))
  const runs = (name: string): FirestoreRunsOfTask => task(name).collection(RUNS_SUBCOLLECTION)
  const taskOf = (snapshot: FirestoreSnapshot): TaskDocument | undefined => {
    const ms = millisOf(snapshot.get('lastStartedAt'))
    const name = snapshot.get('name')
    if (ms === undefined) return undefined
    return { name: typeof name === 'string' ? name : firestoreLockName(snapshot.id), lastStartedAt: new Date(ms) }
  }
  return {
    provider: PROVIDER,
    where,
    timeOf: millisOf,
    async write(key, run, taskDocument) {
      const batch = collection.firestore.batch()
      batch.set(runs(run.name).doc(key), { ...run })
      if (taskDocument) batch.set(task(run.name), { ...taskDocument })
      await batch.commit()
    },
    // A collection's documents come in id order unless told otherwise.
    runs: async (name, limit) =>
      (await runs(name).limit(limit).get()).docs.map((snapshot) => ({
        key: snapshot.id,
        fields: snapshot.data() ?? {},
      })),
    runKeys: async (name, limit) => (await runs(name).select().limit(limit).get()).docs.map((snapshot) => snapshot.id),
    async deleteRuns(name, keys) {
      const batch = collection.firestore.batch()
      for (const key of keys) batch.delete(runs(name).doc(key))
      await batch.commit()
    },
    tasks: async () =>
      (await collection.get()).docs.flatMap((snapshot) => {
        const found = taskOf(snapshot)
        return found ? [found] : []
      }),
    async forgetTask(name, cutoff) {
      const document = task(name)
      const snapshot = await document.get()
      const found = snapshot.exists ? taskOf(snapshot) : undefined
      if (!found || found.lastStartedAt.getTime() >= cutoff) return
      try {
        // Only as read: a run written since keeps the task.
        await document.delete({ lastUpdateTime: snapshot.updateTime })
      } catch (error) {
        if (!hasCode(error, CODE.FAILED_PRECONDITION)) throw error
      }
    },
  }
}
