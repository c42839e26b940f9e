import { randomBytes } from 'node:crypto'
import { setImmediate as tick } from 'node:timers/promises'

/**
 * An in-memory stand-in for the driver methods the MongoDB provider and inspector call,
 * `Collection.findOneAndUpdate` (provider), `find`, `findOne`, `updateOne` and `deleteMany` (inspector), with
 * the semantics of MongoDB 6+ and the mongodb 6/7 driver. No MongoDB server can run on this
 * machine; the same semantics tests run against a real server when SHEDLOCK_MONGODB_URL is set,
 * which keeps this fake honest.
 *
 * What it models, and nothing more (anything else throws "not supported by the fake", so that a
 * provider change cannot silently rely on behaviour the fake lacks):
 * - filters: top-level fields only, each an equality value or an object of `$eq $lt $lte $gt $gte`
 *   and `$regex`; equality and comparison follow BSON type bracketing (a Date bound never matches
 *   a string, a missing field matches no comparison and no equality except with `null`); `$regex`
 *   takes a pattern string without `$options`, matches string values only, and runs as a
 *   JavaScript `u` RegExp (MongoDB's PCRE agrees on the anchored, escaped prefixes the inspector
 *   sends; a pattern with a NUL character fails as on the server);
 * - updates: `$set` of top-level fields; a replacement document is refused like the driver does
 *   (MongoInvalidArgumentError), and changing `_id` fails with code 66 (ImmutableField);
 *   `findOneAndUpdate` also takes an update pipeline (MongoDB 4.2+) of `$set` stages of top-level
 *   fields whose values are aggregation expressions: a field path `'$field'`, `$literal`, `$add`
 *   of numbers (null when an operand is null or missing) and `$ifNull`; other values are literals;
 * - options `upsert`, `returnDocument` ('before', the default, or 'after') and
 *   `includeResultMetadata`; the resolved value is the driver 6/7 shape: the document or `null`,
 *   or `{ value, ok: 1, lastErrorObject }` with `includeResultMetadata: true`;
 * - `find(filter).toArray()` (documents in insertion order, as a collection scan returns them
 *   without a sort), `findOne(filter)` (the first match or `null`), and `updateOne(filter, update)`
 *   without upsert, resolving to `{ acknowledged, matchedCount, modifiedCount, upsertedCount,
 *   upsertedId }` (a `$set` that writes the values already stored matches but modifies nothing),
 *   and `deleteMany(filter)`, resolving to `{ acknowledged, deletedCount }` (each document is
 *   matched and deleted atomically, as on a server; other calls may run between documents);
 *   each returns copies;
 * - upsert: when nothing matches, a document built from the filter's equality fields plus `$set`
 *   is inserted, and the unique `_id` index refuses it with E11000 (code 11000) when a document
 *   with that `_id` exists; MongoDB does not retry such an upsert, because the filter is not made
 *   of equality predicates on `_id` alone;
 * - atomicity: matching and updating one document is atomic, but an upsert's "nothing matched"
 *   and its insert are two steps with other operations in between, so two concurrent upserts of
 *   a new `_id` both try to insert and the second fails with E11000, as on a real server;
 * - every call is asynchronous (it yields to the event loop), like a network round trip; a broken
 *   connection or a queued failure rejects any of them (`find` when its cursor is read).
 */
export class FakeMongoCollection {
  /** Like the driver's `Collection.collectionName`. */
  readonly collectionName: string
  /** Calls of `findOneAndUpdate` so far, rejected ones included. */
  operations = 0
  readonly #documents = new Map<string, Document>()
  #broken: Error | undefined
  readonly #failures: Error[] = []

  constructor(collectionName = 'shedLock') {
    this.collectionName = collectionName
  }

  /** `Collection.findOneAndUpdate` of the mongodb 6/7 driver, for the subset described above. */
  async findOneAndUpdate(
    filter: Document,
    update: Document | Document[],
    options: FindOneAndUpdateOptions = {},
  ): Promise<unknown> {
    this.operations++
    checkOptions(options)
    const fieldsOf = updaterOf(update)
    const predicates = compile(filter)
    await tick()
    this.#throwIfFailing(filter)

    const wrap = (value: Document | null, lastErrorObject: Document): unknown =>
      options.includeResultMetadata ? { value, ok: 1, lastErrorObject } : value
    const after = options.returnDocument === 'after'

    const match = [...this.#documents.values()].find((doc) => predicates.every((p) => p(doc)))
    if (match) {
      // Match and update happen in one step: WiredTiger makes a single-document update atomic.
      const set = fieldsOf(match)
      if ('_id' in set && !bsonEqual(set._id, match._id)) throw immutableId()
      const before = structuredClone(match)
      Object.assign(match, structuredClone(set))
      await tick()
      return wrap(structuredClone(after ? match : before), { n: 1, updatedExisting: true })
    }
    if (!options.upsert) {
      await tick()
      return wrap(null, { n: 0, updatedExisting: false })
    }

    const base = structuredClone(equalities(filter))
    const set = fieldsOf(base)
    const inserted: Document = { ...base, ...structuredClone(set) }
    if ('_id' in set && '_id' in filter && !bsonEqual(set._id, filter._id)) throw immutableId()
    if (!('_id' in inserted)) inserted._id = randomBytes(12).toString('hex')
    // Other operations run between "nothing matched" and the insert, as on a real server.
    await tick()
    this.#throwIfFailing()
    const key = keyOf(inserted._id)
    if (this.#documents.has(key)) throw duplicateKey(this.collectionName, inserted._id)
    this.#documents.set(key, inserted)
    await tick()
    return wrap(after ? structuredClone(inserted) : null, { n: 1, updatedExisting: false, upserted: inserted._id })
  }

  /** `Collection.find`: a cursor of which the fake has `toArray()`. Filters are checked at once, as the fake refuses what it cannot model. */
  find(filter: Document = {}, options: Document = {}): { toArray(): Promise<Document[]> } {
    if (Object.keys(options ?? {}).length > 0) throw notSupported('find options')
    const predicates = compile(filter)
    return {
      toArray: async () => {
        await tick()
        this.#throwIfFailing(filter)
        return [...this.#documents.values()]
          .filter((doc) => predicates.every((p) => p(doc)))
          .map((doc) => structuredClone(doc))
      },
    }
  }

  /** `Collection.findOne`: the first matching document, or `null`. */
  async findOne(filter: Document = {}, options: Document = {}): Promise<Document | null> {
    if (Object.keys(options ?? {}).length > 0) throw notSupported('findOne options')
    const predicates = compile(filter)
    await tick()
    this.#throwIfFailing(filter)
    const match = [...this.#documents.values()].find((doc) => predicates.every((p) => p(doc)))
    return match ? structuredClone(match) : null
  }

  /** `Collection.updateOne` without upsert: updates the first matching document, atomically. */
  async updateOne(filter: Document, update: Document, options: Document = {}): Promise<UpdateResult> {
    for (const [key, value] of Object.entries(options ?? {})) {
      if (key === 'upsert' ? value !== false : key !== 'writeConcern' && key !== 'comment')
        throw notSupported(`updateOne option ${key}`)
    }
    // The driver refuses a replacement document before it sends anything.
    const keys = Object.keys(update ?? {})
    if (keys.length === 0 || !keys.every((key) => key.startsWith('$')))
      throw new MongoInvalidArgumentError('Update document requires atomic operators')
    const set = setOf(update)
    const predicates = compile(filter)
    await tick()
    this.#throwIfFailing(filter)
    const match = [...this.#documents.values()].find((doc) => predicates.every((p) => p(doc)))
    if (!match) return { acknowledged: true, matchedCount: 0, modifiedCount: 0, upsertedCount: 0, upsertedId: null }
    if ('_id' in set && !bsonEqual(set._id, match._id)) throw immutableId()
    // MongoDB leaves a document whose fields already hold the values alone: matched, not modified.
    const modified = Object.entries(set).some(([field, value]) => !(field in match) || !bsonEqual(match[field], value))
    Object.assign(match, structuredClone(set))
    await tick()
    return { acknowledged: true, matchedCount: 1, modifiedCount: modified ? 1 : 0, upsertedCount: 0, upsertedId: null }
  }

  /** `Collection.deleteMany`: deletes every matching document. */
  async deleteMany(filter: Document = {}, options: Document = {}): Promise<DeleteResult> {
    for (const key of Object.keys(options ?? {}))
      if (key !== 'writeConcern' && key !== 'comment') throw notSupported(`deleteMany option ${key}`)
    const predicates = compile(filter)
    await tick()
    this.#throwIfFailing(filter)
    let deletedCount = 0
    for (const [key, doc] of this.#documents) {
      // Each document is matched and deleted in one step; other operations may run in between.
      if (predicates.every((p) => p(doc))) {
        this.#documents.delete(key)
        deletedCount++
        await tick()
      }
    }
    return { acknowledged: true, deletedCount }
  }

  // ---- test helpers, not part of the driver's API: direct access to the stored documents ----

  /** A copy of the stored document with this `_id`, or `undefined`. */
  document(id: unknown): Document | undefined {
    const doc = this.#documents.get(keyOf(id))
    return doc && structuredClone(doc)
  }

  /** Inserts a document as it is (e.g. one that Java ShedLock wrote). Fails with E11000 like an insert would. */
  insertDocument(doc: Document): void {
    const key = keyOf(doc._id)
    if (this.#documents.has(key)) throw duplicateKey(this.collectionName, doc._id)
    this.#documents.set(key, structuredClone(doc))
  }

  /** Deletes the document with this `_id`, if any. */
  deleteDocument(id: unknown): void {
    this.#documents.delete(keyOf(id))
  }

  /** Every call from now on rejects with a network error, as on a dropped connection, until {@link restoreConnection}. */
  breakConnection(): void {
    this.#broken = new MongoNetworkError('connection 3 to 127.0.0.1:27017 closed')
  }

  restoreConnection(): void {
    this.#broken = undefined
  }

  /** The next call rejects with `error` (a server error, say), after its round trip. */
  failNext(error: Error): void {
    this.#failures.push(error)
  }

  #throwIfFailing(filter?: Document): void {
    if (this.#broken) throw this.#broken
    // What the server refuses once the filter reaches it: a $regex with an embedded NUL (RegexMatchExpression, BadValue).
    for (const condition of Object.values(filter ?? {})) {
      if (isOperatorObject(condition) && typeof condition.$regex === 'string' && condition.$regex.includes('\0')) {
        throw new MongoServerError('Regular expression cannot contain an embedded null byte', 2, 'BadValue')
      }
    }
    const next = this.#failures.shift()
    if (next) throw next
  }
}

/** A BSON document, as far as the fake is concerned. */
export type Document = Record<string, unknown>

/** What `deleteMany` resolves to, as the driver's `DeleteResult`. */
export interface DeleteResult {
  acknowledged: boolean
  deletedCount: number
}

/** The options of `findOneAndUpdate` the fake understands. */
export interface FindOneAndUpdateOptions {
  upsert?: boolean
  returnDocument?: 'before' | 'after'
  includeResultMetadata?: boolean
  writeConcern?: unknown
  comment?: unknown
  maxTimeMS?: number
}

/** What `updateOne` resolves to, as the driver's `UpdateResult`. */
export interface UpdateResult {
  acknowledged: boolean
  matchedCount: number
  modifiedCount: number
  upsertedCount: number
  upsertedId: unknown
}

const KNOWN_OPTIONS = new Set([
  'upsert',
  'returnDocument',
  'includeResultMetadata',
  'writeConcern',
  'comment',
  'maxTimeMS',
])

/** Shaped like the driver's error of the same name: `name` is what callers test. */
export class MongoServerError extends Error {
  override name = 'MongoServerError'
  readonly code: number
  readonly codeName: string
  readonly errorResponse: Document

  constructor(message: string, code: number, codeName: string, extra: Document = {}) {
    super(message)
    this.code = code
    this.codeName = codeName
    this.errorResponse = { ok: 0, errmsg: message, code, codeName, ...extra }
    Object.assign(this, extra)
  }
}

/** Shaped like the driver's error of the same name. */
export class MongoNetworkError extends Error {
  override name = 'MongoNetworkError'
}

/** Shaped like the driver's error of the same name. */
export class MongoInvalidArgumentError extends Error {
  override name = 'MongoInvalidArgumentError'
}

function notSupported(what: string): Error {
  return new Error(
    `${what} is not supported by the fake MongoDB collection; extend test/helpers/fake-mongo-collection.ts (and check it against a real server)`,
  )
}

function checkOptions(options: FindOneAndUpdateOptions): void {
  for (const key of Object.keys(options ?? {})) if (!KNOWN_OPTIONS.has(key)) throw notSupported(`option ${key}`)
}

/** The fields an update (a `$set` document, or a pipeline of `$set` stages) writes into a document. */
function updaterOf(update: Document | Document[]): (doc: Document) => Document {
  if (Array.isArray(update)) {
    const stages = update.map((stage) => {
      const keys = Object.keys(stage ?? {})
      if (keys.length !== 1 || keys[0] !== '$set' || !isPlainObject(stage.$set))
        throw notSupported(`pipeline stage ${keys.join(', ')}`)
      for (const field of Object.keys(stage.$set)) {
        if (field.includes('.') || field.startsWith('$')) throw notSupported(`$set of ${field}`)
      }
      return stage.$set
    })
    return (doc) => {
      // Each stage sees the document as the stages before it left it.
      const current = structuredClone(doc)
      const fields: Document = {}
      for (const stage of stages) {
        // A field whose expression is missing (a path to no field) is not set, as $addFields does.
        const values = Object.fromEntries(
          Object.entries(stage)
            .map(([field, e]) => [field, evaluate(e, current)])
            .filter(([, value]) => value !== undefined),
        )
        Object.assign(current, values)
        Object.assign(fields, values)
      }
      return fields
    }
  }
  // The driver refuses a replacement document before it sends anything.
  const keys = Object.keys(update ?? {})
  if (keys.length === 0 || !keys.every((key) => key.startsWith('$')))
    throw new MongoInvalidArgumentError('Update document requires atomic operators')
  const set = setOf(update)
  return () => set
}

/** An aggregation expression of the subset described at the top, against `doc`; `undefined` is "missing". */
function evaluate(expression: unknown, doc: Document): unknown {
  if (typeof expression === 'string' && expression.startsWith('$')) {
    const field = expression.slice(1)
    if (field.includes('.') || field.startsWith('$') || field === '') throw notSupported(`field path ${expression}`)
    return doc[field]
  }
  if (Array.isArray(expression)) throw notSupported('array expressions')
  if (!isPlainObject(expression)) return expression
  const keys = Object.keys(expression)
  if (keys.length !== 1 || !keys[0]!.startsWith('$')) throw notSupported('expression objects other than one operator')
  const [op] = keys as [string]
  const args = expression[op]
  if (op === '$literal') return args
  if (!Array.isArray(args)) throw notSupported(`${op} without an array of arguments`)
  const values = args.map((arg) => evaluate(arg, doc))
  switch (op) {
    case '$add': {
      if (values.some((v) => v === null || v === undefined)) return null
      if (!values.every((v) => typeof v === 'number')) throw notSupported('$add of other than numbers')
      return (values as number[]).reduce((a, b) => a + b, 0)
    }
    case '$ifNull': {
      if (values.length < 2)
        throw new MongoServerError('$ifNull needs at least two arguments', 1257300, 'Location1257300')
      const found = values.slice(0, -1).find((v) => v !== null && v !== undefined)
      return found ?? values.at(-1)
    }
    default:
      throw notSupported(`expression operator ${op}`)
  }
}

function setOf(update: Document): Document {
  for (const key of Object.keys(update)) if (key !== '$set') throw notSupported(`update operator ${key}`)
  const set = update.$set
  if (!isPlainObject(set))
    throw new MongoServerError('Modifiers operate on fields but we found type string instead', 9, 'FailedToParse')
  for (const field of Object.keys(set)) {
    if (field.includes('.') || field.startsWith('$')) throw notSupported(`$set of ${field}`)
  }
  return set
}

type Predicate = (doc: Document) => boolean

function compile(filter: Document): Predicate[] {
  if (!isPlainObject(filter)) throw notSupported('a filter that is not an object')
  return Object.entries(filter).map(([field, condition]) => {
    if (field.startsWith('$') || field.includes('.')) throw notSupported(`filter field ${field}`)
    if (!isOperatorObject(condition)) return (doc) => bsonEqual(doc[field], condition)
    if ('$options' in condition) throw notSupported('$options')
    const tests = Object.entries(condition).map(([op, bound]): ((value: unknown, present: boolean) => boolean) => {
      switch (op) {
        case '$eq':
          return (value) => bsonEqual(value, bound)
        case '$lt':
          return (value, present) => present && compare(value, bound, (c) => c < 0)
        case '$lte':
          return (value, present) => present && compare(value, bound, (c) => c <= 0)
        case '$gt':
          return (value, present) => present && compare(value, bound, (c) => c > 0)
        case '$gte':
          return (value, present) => present && compare(value, bound, (c) => c >= 0)
        case '$regex': {
          if (typeof bound !== 'string') throw notSupported('$regex other than a pattern string')
          const pattern = new RegExp(bound, 'u')
          return (value) => typeof value === 'string' && pattern.test(value)
        }
        default:
          throw notSupported(`filter operator ${op}`)
      }
    })
    return (doc) => tests.every((test) => test(doc[field], field in doc))
  })
}

/** The fields an upsert copies from the filter: plain equalities and `$eq`. */
function equalities(filter: Document): Document {
  const out: Document = {}
  for (const [field, condition] of Object.entries(filter)) {
    if (!isOperatorObject(condition)) out[field] = condition
    else if ('$eq' in condition) out[field] = condition.$eq
  }
  return out
}

/** Compares within one BSON type bracket (numbers, strings, Dates); values of different brackets never compare. */
function compare(a: unknown, b: unknown, accept: (c: number) => boolean): boolean {
  if (a instanceof Date && b instanceof Date) return accept(Math.sign(a.getTime() - b.getTime()))
  if (typeof a === 'number' && typeof b === 'number') return accept(Math.sign(a - b))
  // MongoDB's default (simple) collation compares strings by their UTF-8 bytes.
  if (typeof a === 'string' && typeof b === 'string') return accept(Buffer.compare(Buffer.from(a), Buffer.from(b)))
  return false
}

function bsonEqual(a: unknown, b: unknown): boolean {
  if (b === null) return a === null || a === undefined
  if (a instanceof Date || b instanceof Date)
    return a instanceof Date && b instanceof Date && a.getTime() === b.getTime()
  if (isPlainObject(a) || isPlainObject(b) || Array.isArray(a) || Array.isArray(b))
    throw notSupported('equality on documents or arrays')
  return a === b
}

function isPlainObject(value: unknown): value is Document {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date)
}

function isOperatorObject(value: unknown): value is Document {
  if (!isPlainObject(value)) return false
  const keys = Object.keys(value)
  return keys.length > 0 && keys.every((key) => key.startsWith('$'))
}

function keyOf(id: unknown): string {
  if (typeof id === 'string' || typeof id === 'number') return `${typeof id}:${id}`
  throw notSupported(`_id of type ${typeof id}`)
}

function duplicateKey(collection: string, id: unknown): MongoServerError {
  return new MongoServerError(
    `E11000 duplicate key error collection: test.${collection} index: _id_ dup key: { _id: ${JSON.stringify(id)} }`,
    11000,
    'DuplicateKey',
    {
      keyPattern: { _id: 1 },
      keyValue: { _id: id },
    },
  )
}

function immutableId(): MongoServerError {
  return new MongoServerError(
    "Performing an update on the path '_id' would modify the immutable field '_id'",
    66,
    'ImmutableField',
  )
}
