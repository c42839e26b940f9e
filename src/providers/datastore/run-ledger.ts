import { LockConfigurationError } from '../../core/errors.ts'
import type { RunLedger } from '../../core/run-ledger.ts'
import {
  type DocumentRunLedgerOptions,
  documentRunLedger,
  RUN_FIELDS,
  type RunDocuments,
  type TaskDocument,
} from '../../support/document-run-ledger.ts'
import {
  checkSpace,
  type DatastoreClient,
  type DatastoreEntityWrite,
  type DatastoreKey,
  describeDatastoreError,
  isContention,
  kindLabel,
  type LockSpace,
  PROVIDER,
  timeOf,
} from './format.ts'
import { readIn, retryContention, transact } from './transaction.ts'

/** The part of a `@google-cloud/datastore` `Query` the run ledger builds. */
export interface DatastoreRunQuery {
  order(property: string): DatastoreRunQuery
  limit(count: number): DatastoreRunQuery
  start(cursor: string): DatastoreRunQuery
  hasAncestor(key: DatastoreKey): DatastoreRunQuery
  /** `'__key__'`: the entities' keys only. */
  select(field: string): DatastoreRunQuery
}

/**
 * The part of a `@google-cloud/datastore` (10.x) `Datastore` client the run ledger calls: pass
 * your `new Datastore({ projectId })` as it is.
 */
export interface DatastoreRunsClient extends Omit<DatastoreClient, 'createQuery' | 'runQuery'> {
  createQuery(namespace: string, kind: string): DatastoreRunQuery
  runQuery(
    query: DatastoreRunQuery,
    options: { wrapNumbers: boolean },
  ): Promise<readonly [unknown[], { moreResults?: string; endCursor?: string }]>
  upsert(entities: UnindexedEntity[]): Promise<unknown>
  delete(keys: DatastoreKey[]): Promise<unknown>
}

/** An entity to upsert, none of whose properties is indexed. */
export interface UnindexedEntity extends DatastoreEntityWrite {
  excludeFromIndexes: string[]
}

/** Options of {@link datastoreRunLedger}. */
export interface DatastoreRunLedgerOptions extends DocumentRunLedgerOptions {
  /** Your `@google-cloud/datastore` client (the provider's). */
  datastore: DatastoreRunsClient
  /** The kind of the run entities; the task entities above them are of kind `<kind>_task`. @default "shedlock_run" */
  kind?: string
  /** The namespace of the run entities. @default the client's */
  namespace?: string
}

/** The default kind of the run entities. */
export const DEFAULT_RUN_KIND = 'shedlock_run'

// Nothing is queried by property: no property needs the index Datastore would keep of it.
const TASK_FIELDS = ['name', 'lastStartedAt']
// Task entities per query batch.
const PAGE = 500

/**
 * The run history in Datastore (or Firestore in Datastore mode), apart from the lock kind: one
 * entity per task, key `[<kind>_task, <task name>]` with the properties `name` and
 * `lastStartedAt`, and beneath it, in its entity group, one entity per run, key `[…, <kind>,
 * <run key>]`, whose key name sorts newest first. Reads are ancestor queries in key order, which
 * the built-in indexes serve (no `index.yaml` entry), and strongly consistent; no property is
 * indexed. `record()` is one commit of two upserts; a long run's `finish()` one upsert. A read or
 * write that Datastore aborts for contention on the task's entity group (a write of the same
 * task at the same moment) is sent again, up to ten times: each is whole, so sending it twice
 * writes the same.
 *
 * ```ts
 * const datastore = new Datastore()
 * const executor = createLockingTaskExecutor(datastoreLockProvider({ datastore }), {
 *   runLedger: datastoreRunLedger({ datastore }),
 * })
 * ```
 *
 * @throws LockConfigurationError for a missing client, an invalid kind or namespace, or a bad `keep`, `maxAge`, `pruneDelay` or `timeout`.
 */
export function datastoreRunLedger(options: DatastoreRunLedgerOptions): RunLedger {
  const { kind = DEFAULT_RUN_KIND } = options ?? {}
  const space = checkSpace({ ...options, kind })
  const datastore = options.datastore
  if (typeof datastore.upsert !== 'function' || typeof datastore.delete !== 'function') {
    throw new LockConfigurationError(
      `${PROVIDER}: the run ledger needs the client's upsert() and delete(): pass new Datastore() from @google-cloud/datastore`,
    )
  }
  const where = kindLabel(space)
  return documentRunLedger(datastoreRunDocuments(datastore, space, where), options, describeDatastoreError(where))
}

function datastoreRunDocuments(datastore: DatastoreRunsClient, space: LockSpace, where: string): RunDocuments {
  const namespace = space.namespace ?? ''
  const taskKind = `${space.kind}_task`
  const key = (path: string[]): DatastoreKey =>
    datastore.key(space.namespace === undefined ? { path } : { namespace: space.namespace, path })
  const taskKey = (name: string): DatastoreKey => key([taskKind, name])
  const runKey = (name: string, run: string): DatastoreKey => key([taskKind, name, space.kind, run])
  const nameOf = (entity: unknown): string | undefined => {
    const name = ((entity as Record<symbol, unknown>)[datastore.KEY] as DatastoreKey | undefined)?.name
    return typeof name === 'string' ? name : undefined
  }
  const runsOf = (name: string, limit: number): DatastoreRunQuery =>
    datastore.createQuery(namespace, space.kind).hasAncestor(taskKey(name)).order('__key__').limit(limit)
  return {
    provider: PROVIDER,
    where,
    timeOf,
    async write(run, document, task) {
      const entities: UnindexedEntity[] = [
        { key: runKey(document.name, run), data: { ...document }, excludeFromIndexes: [...RUN_FIELDS] },
      ]
      if (task) entities.push({ key: taskKey(task.name), data: { ...task }, excludeFromIndexes: TASK_FIELDS })
      await retryContention(() => datastore.upsert(entities))
    },
    runs: async (name, limit) => {
      const [entities] = await retryContention(() => datastore.runQuery(runsOf(name, limit), { wrapNumbers: false }))
      return entities.flatMap((entity) => {
        const run = nameOf(entity)
        return run === undefined ? [] : [{ key: run, fields: entity as Record<string, unknown> }]
      })
    },
    runKeys: async (name, limit) => {
      const query = runsOf(name, limit).select('__key__')
      const [entities] = await retryContention(() => datastore.runQuery(query, { wrapNumbers: false }))
      return entities.flatMap((entity) => nameOf(entity) ?? [])
    },
    async deleteRuns(name, keys) {
      await retryContention(() => datastore.delete(keys.map((run) => runKey(name, run))))
    },
    async tasks() {
      const tasks: TaskDocument[] = []
      let cursor: string | undefined
      for (;;) {
        let query = datastore.createQuery(namespace, taskKind).order('__key__').limit(PAGE)
        if (cursor !== undefined) query = query.start(cursor)
        const [entities, info] = await datastore.runQuery(query, { wrapNumbers: false })
        for (const entity of entities) {
          const name = nameOf(entity)
          const ms = timeOf((entity as Record<string, unknown>).lastStartedAt)
          if (name !== undefined && ms !== undefined) tasks.push({ name, lastStartedAt: new Date(ms) })
        }
        if (entities.length < PAGE || !info.endCursor || info.moreResults === 'NO_MORE_RESULTS') return tasks
        cursor = info.endCursor
      }
    },
    async forgetTask(name, cutoff) {
      try {
        await transact(space, async (transaction) => {
          const entity = await readIn(transaction, taskKey(name))
          const ms = timeOf(entity?.lastStartedAt)
          // Only as read: a run written since keeps the task.
          if (ms === undefined || ms >= cutoff) return { value: undefined, write: false }
          transaction.delete(taskKey(name))
          return { value: undefined, write: true }
        })
      } catch (error) {
        if (!isContention(error)) throw error
      }
    },
  }
}
