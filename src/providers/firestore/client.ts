import { LockConfigurationError } from '../../core/errors.ts'
import { CODE, hasCode, PROVIDER } from './format.ts'

// The part of @google-cloud/firestore (7 and 8) that the provider and the inspector call. We don't
// import the client: pass `firestore.collection('shedlock')` as it is.

/** A document as read: `DocumentSnapshot` of `@google-cloud/firestore`. */
export interface FirestoreSnapshot {
  readonly exists: boolean
  readonly id: string
  /** When the document was last written (a Timestamp), the version a conditional write names. */
  readonly updateTime?: unknown
  /** When the read happened, on Firestore's clock (a Timestamp). */
  readonly readTime?: unknown
  get(field: string): unknown
}

/** A write condition: `Precondition` of `@google-cloud/firestore`. */
export interface FirestorePrecondition {
  lastUpdateTime?: unknown
  exists?: boolean
}

/** One document: `DocumentReference` of `@google-cloud/firestore`. */
export interface FirestoreDocument {
  get(): Promise<FirestoreSnapshot>
  create(data: Record<string, unknown>): Promise<unknown>
  update(data: Record<string, unknown>, precondition?: FirestorePrecondition): Promise<unknown>
  delete(precondition?: FirestorePrecondition): Promise<unknown>
}

/** The lock collection: `CollectionReference` of `@google-cloud/firestore`, e.g. `firestore.collection('shedlock')`. */
export interface FirestoreLockCollection {
  /** The collection's id, for error messages only. */
  readonly id: string
  doc(id: string): FirestoreDocument
  get(): Promise<{ readonly docs: readonly FirestoreSnapshot[] }>
}

/**
 * Checks, at construction, that `collection` is a collection reference.
 * @throws LockConfigurationError otherwise (a Firestore client or a document is not one).
 */
export function checkCollection(collection: unknown): asserts collection is FirestoreLockCollection {
  const candidate = collection as Partial<FirestoreLockCollection> | null | undefined
  if (!candidate || typeof candidate.doc !== 'function' || typeof candidate.get !== 'function') {
    throw new LockConfigurationError(
      `${PROVIDER}: pass your lock collection as { collection }, e.g. new Firestore().collection('shedlock') (a CollectionReference; a Firestore client or a DocumentReference is not one)`,
    )
  }
}

/**
 * Writes `data` over the document as `snapshot` read it, only if nobody wrote it since (its
 * `updateTime`, Firestore's compare-and-set); a missing document is created, only if still missing.
 * Resolves to `false` when the condition failed: another node wrote (or created) it meanwhile.
 */
export async function writeAsRead(
  ref: FirestoreDocument,
  snapshot: FirestoreSnapshot,
  data: Record<string, unknown>,
): Promise<boolean> {
  try {
    if (snapshot.exists) await ref.update(data, { lastUpdateTime: snapshot.updateTime })
    else await ref.create(data)
    return true
  } catch (error) {
    if (hasCode(error, CODE.FAILED_PRECONDITION) || hasCode(error, CODE.ALREADY_EXISTS)) return false
    throw error
  }
}
