import { randomUUID } from 'node:crypto'
import { isConditionFailure, isNotFound, isServerError, lockBody, type LockMetadata, readMetadata } from './format.ts'
import type { S3Lib, S3SendClient } from './sdk.ts'

// The three requests a lock needs (HEAD, conditional PUT, conditional DELETE), shared by the
// provider and the inspector, with the ETag quirk of Ceph RGW handled in one place.

/** A lock object as HEAD read it. */
export interface LockObject extends LockMetadata {
  /** The ETag as the server returned it (quoted, `"…"`). */
  readonly etag: string
}

/**
 * Ceph RGW (16.2, measured) answers 412 to `If-Match: "<etag>"`, the quoted form that S3 returns
 * and the AWS SDK passes on, and honours `If-Match: <etag>` unquoted; AWS S3 and MinIO take the
 * quoted form, as RFC 9110 writes it. So the quoted form goes first, and a 412 whose object a
 * fresh HEAD shows unchanged (same ETag: no other write happened, as every write has a new
 * random body) means the server wants the bare form: the request is sent again unquoted, and
 * every later one on that client goes unquoted at once. Kept per client, shared by providers and
 * inspectors.
 */
const unquotedServers = new WeakMap<object, true>()

function unquote(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"(.*)"$/, '$1')
}

/** How many times a conditional PutObject is sent while the server answers 5xx and the object shows it was not applied. */
const PUT_ATTEMPTS = 3

/** Whether the object read holds the metadata of the write `metadata`: the three entries shedlock writes, all equal. */
function isOurs(object: LockMetadata, metadata: Record<string, string>): boolean {
  const written = readMetadata(metadata)
  return (
    object.lockUntil === written.lockUntil &&
    object.lockedAt === written.lockedAt &&
    object.lockedBy === written.lockedBy
  )
}

/** The object store operations of one bucket and prefix. */
export interface LockObjects {
  /** HEAD of `name`'s object; `undefined` when there is none. */
  head(name: string): Promise<LockObject | undefined>
  /** Creates `name`'s object if there is none; its ETag, or `undefined` when one exists (412/409). */
  create(name: string, metadata: Record<string, string>): Promise<string | undefined>
  /** Overwrites `name`'s object if its ETag is still `etag`; the new ETag, or `undefined` when it changed or is gone. */
  replace(name: string, etag: string, metadata: Record<string, string>): Promise<string | undefined>
  /** Deletes `name`'s object if its ETag is still `etag`; false when it changed or is gone. Only servers that honour `If-Match` on DELETE (see `conditionalDeletes`). */
  remove(name: string, etag: string): Promise<boolean>
  /** The object key of `name`. */
  key(name: string): string
  /**
   * Whether the server honours `If-Match` on DeleteObject, measured once per client: a probe
   * object is written, deleted with an ETag it does not have, then looked for (4 requests).
   */
  deletesAreConditional(): Promise<boolean>
}

/** Names of the probe objects of {@link LockObjects.deletesAreConditional}: no lock has one (list() leaves them out). */
export const PROBE_PREFIX = '.shedlock-delete-probe-'

const conditionalDeletes = new WeakMap<object, Promise<boolean>>()

export function lockObjects(
  client: S3SendClient,
  bucket: string,
  prefix: string,
  commands: () => Promise<S3Lib>,
): LockObjects {
  const key = (name: string): string => prefix + name

  const head = async (name: string): Promise<LockObject | undefined> => {
    const { HeadObjectCommand } = await commands()
    try {
      const reply = (await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key(name) }))) as {
        ETag?: string
        Metadata?: Record<string, string>
      }
      return { etag: reply.ETag ?? '', ...readMetadata(reply.Metadata) }
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
  }

  /**
   * One conditional PutObject; its ETag, or `undefined` when the condition failed. A server error
   * (5xx) leaves the outcome unknown: Ceph RGW answers a contended conditional write with 500 now
   * and then (about 1 in 5,000), applied or not. So is a 412 or 409 after the SDK's own retries,
   * which may refuse a repeat of a write that landed. Then the object decides, as after a race:
   * ours (the metadata we wrote, whose locked-by is unique to the acquisition), won; another
   * version, lost; the version the condition named, nothing happened, and the write goes again,
   * up to {@link PUT_ATTEMPTS} times, before the server error is thrown.
   */
  const put = async (
    name: string,
    metadata: Record<string, string>,
    condition: { IfMatch: string } | { IfNoneMatch: '*' },
  ): Promise<string | undefined> => {
    const { PutObjectCommand } = await commands()
    for (let attempt = 1; ; attempt++) {
      try {
        const reply = (await client.send(
          new PutObjectCommand({ Bucket: bucket, Key: key(name), Body: lockBody(), Metadata: metadata, ...condition }),
        )) as {
          ETag?: string
        }
        return reply.ETag ?? ''
      } catch (error) {
        const conflict = isConditionFailure(error)
        // A conflict on the SDK's first attempt is a race lost; after a retry it may be our own write.
        if (conflict && ((error as { $metadata?: { attempts?: number } }).$metadata?.attempts ?? 1) <= 1)
          return undefined
        if (!conflict && !isServerError(error)) throw error
        const now = await head(name)
        if (now && isOurs(now, metadata)) return now.etag
        if (conflict) return undefined
        const untouched =
          'IfMatch' in condition
            ? now !== undefined && unquote(now.etag) === unquote(condition.IfMatch)
            : now === undefined
        if (!untouched) return undefined
        if (attempt >= PUT_ATTEMPTS) throw error
      }
    }
  }

  /** Runs `attempt` with the ETag in the form the server takes (see {@link unquotedServers}). */
  const withEtag = async <T>(
    name: string,
    etag: string,
    failed: T,
    attempt: (form: string) => Promise<T>,
  ): Promise<T> => {
    if (unquotedServers.has(client)) return attempt(unquote(etag))
    const result = await attempt(etag)
    if (result !== failed || unquote(etag) === etag) return result
    const now = await head(name)
    if (now?.etag !== etag) return failed
    unquotedServers.set(client, true)
    return attempt(unquote(etag))
  }

  const probeDeletes = async (): Promise<boolean> => {
    const { DeleteObjectCommand } = await commands()
    const probe = `${PROBE_PREFIX}${randomUUID()}`
    if ((await put(probe, {}, { IfNoneMatch: '*' })) === undefined) return false
    try {
      await client.send(
        new DeleteObjectCommand({ Bucket: bucket, Key: key(probe), IfMatch: '"00000000000000000000000000000000"' }),
      )
    } catch (error) {
      if (!isConditionFailure(error)) throw error
    }
    const survived = (await head(probe)) !== undefined
    if (survived) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key(probe) }))
    return survived
  }

  return {
    key,
    head,
    deletesAreConditional: () => {
      let known = conditionalDeletes.get(client)
      if (!known) {
        known = probeDeletes()
        conditionalDeletes.set(client, known)
        // A failed probe (network) is measured again next time.
        known.catch(() => conditionalDeletes.delete(client))
      }
      return known
    },
    create: (name, metadata) => put(name, metadata, { IfNoneMatch: '*' }),
    replace: (name, etag, metadata) =>
      withEtag(name, etag, undefined, (form) => put(name, metadata, { IfMatch: form })),
    remove: (name, etag) =>
      withEtag(name, etag, false, async (form) => {
        const { DeleteObjectCommand } = await commands()
        try {
          await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key(name), IfMatch: form }))
          return true
        } catch (error) {
          if (isConditionFailure(error) || isNotFound(error)) return false
          throw error
        }
      }),
  }
}
