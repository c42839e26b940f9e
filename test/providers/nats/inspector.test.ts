import { randomUUID } from 'node:crypto'
import { jetstreamManager } from '@nats-io/jetstream'
import { type KV, Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LockInspector } from '../../../src/core/lock-inspector.ts'
import {
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
  type SimpleLock,
} from '../../../src/index.ts'
import {
  type NatsInspectableKv,
  natsLockInspector,
  natsLockKey,
  natsLockProvider,
} from '../../../src/providers/nats/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

const url = process.env.SHEDLOCK_NATS_URL ?? 'nats://127.0.0.1:4222'
const bucket = `shedlock-inspect-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`

const nats = await connectOrSkip('nats', `${url} (SHEDLOCK_NATS_URL)`, async () => {
  const nc = await connect({ servers: url, timeout: 3000 })
  try {
    await jetstreamManager(nc)
    // A second connection reads and writes the store behind the inspector's back.
    return { nc, readerNc: await connect({ servers: url, timeout: 3000 }) }
  } catch (error) {
    await nc.close()
    throw error
  }
})

/** Java ShedLock's value: `ByteBuffer.allocate(8).putLong(lockUntil)`. */
function javaValue(lockUntil: number): Uint8Array {
  const buffer = Buffer.alloc(8)
  buffer.writeBigInt64BE(BigInt(lockUntil))
  return new Uint8Array(buffer)
}

describe.skipIf(!nats)('natsLockInspector', () => {
  const { nc, readerNc } = nats!
  let kv: KV
  let reader: KV
  beforeAll(async () => {
    kv = await new Kvm(nc).create(bucket)
    // open() binds without direct get: reads come from the stream leader.
    reader = await new Kvm(readerNc).open(bucket)
  })
  afterAll(async () => {
    await kv?.destroy()
    await nc.close()
    await readerNc.close()
  })
  const unique = (what: string): string => `${what}-${randomUUID()}`

  describe('contract', () => {
    // The bucket exists from beforeAll on; records keep their hidden token per inspector, so the
    // suite gets one inspector, made on first use.
    let inspector: LockInspector | undefined
    const current = (): LockInspector => (inspector ??= natsLockInspector({ kv }))
    const lazy: LockInspector = {
      name: 'nats',
      clock: "this host's clock",
      list: (selection) => current().list(selection),
      get: (name) => current().get(name),
      release: (lock) => current().release(lock),
      removeExpired: (selection) => current().removeExpired(selection),
    }
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => natsLockProvider({ kv }),
        inspector: lazy,
        keepsLockedBy: false,
        keepsAcquisition: false,
      }),
    )
  })

  it('a force-release leaves a delete marker, and the holder’s release within lockAtLeastFor does not write the key again', async () => {
    const inspector = natsLockInspector({ kv })
    const name = unique('marker')
    const holder = await natsLockProvider({ kv }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }),
    )
    expect(holder).toBeDefined()
    const before = await reader.get(natsLockKey(name))
    expect(before?.operation).toBe('PUT')
    expect(await inspector.release(name)).toBe(true)
    const after = await reader.get(natsLockKey(name))
    expect(after?.operation).toBe('DEL')
    expect(after!.revision).toBeGreaterThan(before!.revision)
    await holder!.unlock()
    // The holder's update at its own revision failed: the marker is still the last entry.
    expect((await reader.get(natsLockKey(name)))?.revision).toBe(after!.revision)
    expect(await inspector.get(name)).toBeUndefined()
  })

  it('removeExpired deletes expired entries at the revision read, then purges the selection’s delete markers once 30 minutes old, up to their own revision', async () => {
    const prefix = `${unique('sweep')}@`
    const [a, b] = [`${prefix}20260101T000000Z`, `${prefix}20260101T010000Z`]
    for (const name of [a, b]) await reader.put(natsLockKey(name), javaValue(Date.now() - 1_000))
    const provider = natsLockProvider({ kv })
    const held = await provider.lock(lockConfiguration({ name: `${prefix}held`, lockAtMostFor: '2h' }))
    const outside = unique('outside')
    await reader.put(outside, javaValue(Date.now() - 1_000))
    const jsm = await jetstreamManager(readerNc)
    /** How many messages the stream keeps for `name`'s key: markers and values. */
    const messages = async (name: string): Promise<number> => {
      const subject = `$KV.${bucket}.${natsLockKey(name)}`
      return (await jsm.streams.info(`KV_${bucket}`, { subjects_filter: subject })).state.subjects?.[subject] ?? 0
    }

    expect(await natsLockInspector({ kv }).removeExpired({ prefix })).toBe(2)
    for (const name of [a, b]) {
      // A delete marker, kept while it is recent.
      expect((await reader.get(natsLockKey(name)))?.operation).toBe('DEL')
      expect(await messages(name)).toBe(1)
    }
    expect((await reader.get(outside))?.operation).toBe('PUT')
    expect((await reader.get(natsLockKey(`${prefix}held`)))?.operation).toBe('PUT')
    await reader.delete(outside)

    // Half an hour later. A node takes b over its marker between the history read and the purge
    // of b's marker (@nats-io/kv's purgeDeletes() would purge b's new value with the marker).
    const bucketOf = kv as unknown as Required<NatsInspectableKv>
    let retaken: SimpleLock | undefined
    const racing: NatsInspectableKv = {
      get: (key) => bucketOf.get(key),
      delete: (key, options) => bucketOf.delete(key, options),
      keys: () => bucketOf.keys(),
      history: (options) => bucketOf.history(options),
      subjectForKey: (key) => bucketOf.subjectForKey(key),
      async purgeBucket(options) {
        if (options.filter === bucketOf.subjectForKey(natsLockKey(b)))
          retaken = await provider.lock(lockConfiguration({ name: b, lockAtMostFor: '2h' }))
        return bucketOf.purgeBucket(options)
      },
    }
    const later = natsLockInspector({ kv: racing, clock: { now: () => Date.now() + 31 * 60_000 } })
    expect(await later.removeExpired({ prefix })).toBe(0)
    expect(retaken).toBeDefined()
    expect(await reader.get(natsLockKey(a))).toBeNull()
    expect(await messages(a)).toBe(0)
    expect((await reader.get(natsLockKey(b)))?.operation).toBe('PUT')
    expect((await later.get(b))?.held).toBe(true)
    // Outside the selection: its marker stays.
    expect((await reader.get(outside))?.operation).toBe('DEL')
    await retaken!.unlock()
    await held!.unlock()
  })

  it('removeExpired on a bucket without history() deletes expired entries and leaves their markers', async () => {
    const name = `${unique('plain')}@20260101T000000Z`
    await reader.put(natsLockKey(name), javaValue(Date.now() - 1_000))
    const bucketOf = kv as unknown as NatsInspectableKv
    const plain: NatsInspectableKv = {
      get: (key) => bucketOf.get(key),
      delete: (key, options) => bucketOf.delete(key, options),
      keys: () => bucketOf.keys(),
    }
    const inspector = natsLockInspector({ kv: plain, clock: { now: () => Date.now() + 31 * 60_000 } })
    expect(await inspector.removeExpired({ prefix: name })).toBe(1)
    expect(await inspector.removeExpired({ prefix: name })).toBe(0)
    expect((await reader.get(natsLockKey(name)))?.operation).toBe('DEL')
  })

  it('provider.inspector() inspects the provider’s bucket, on the provider’s clock', async () => {
    const name = unique('own')
    const provider = natsLockProvider({ kv, clock: { now: () => Date.now() - 120_000 } })
    const lock = await provider.lock(
      lockConfiguration({ name, lockAtMostFor: '1m', createdAt: new Date(Date.now() - 120_000) }),
    )
    expect(lock).toBeDefined()
    // Expired on this host's clock, held on the provider's.
    expect((await natsLockInspector({ kv }).get(name))?.held).toBe(false)
    const inspector = provider.inspector!()
    expect(inspector.name).toBe('nats')
    expect((await inspector.get(name))?.held).toBe(true)
    expect((await inspector.list({ prefix: name })).locks.map((record) => record.name)).toEqual([name])
    await lock!.unlock()
  })

  it('reads a lock Java ShedLock wrote: the raw key is the name, the value 8 bytes of lockUntil, nothing else', async () => {
    const inspector = natsLockInspector({ kv })
    // Java writes every name the server holds as the key itself, "=daily" included.
    const names = [unique('java'), `=${unique('java')}`]
    const until = Date.now() + 3_600_000
    for (const name of names) await reader.put(name, javaValue(until))
    for (const name of names) {
      const record = await inspector.get(name)
      expect(record).toEqual({
        name,
        lockUntil: new Date(until),
        lockedAt: undefined,
        lockedBy: undefined,
        held: true,
        remainingMs: expect.any(Number),
      })
      expect(record!.remainingMs).toBeGreaterThan(3_500_000)
    }
    const listed = (await inspector.list()).locks.filter((record) => names.includes(record.name))
    expect(listed.map((record) => record.name)).toEqual([...names].sort())
    // Expired Java records read as free.
    await reader.put(names[0]!, javaValue(Date.now() - 1_000))
    expect(await inspector.get(names[0]!)).toMatchObject({ held: false, remainingMs: 0 })
    expect(await inspector.release(names[0]!)).toBe(false)
  })

  it('list() decodes names that needed key encoding, and sorts them by name', async () => {
    const inspector = natsLockInspector({ kv })
    const prefix = unique('enc')
    const names = [`${prefix} été`, `${prefix}:b`, `${prefix}/a`, `${prefix}.c`, `${prefix}=3A`]
    const provider = natsLockProvider({ kv })
    const locks = await Promise.all(
      names.map((name) => provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))),
    )
    // Stored under encoded keys where the server cannot hold the name.
    expect(natsLockKey(names[0]!)).toMatch(/^=/)
    expect(await reader.get(natsLockKey(names[1]!))).not.toBeNull()
    const listed = (await inspector.list()).locks.filter((record) => record.name.startsWith(prefix))
    expect(listed.map((record) => record.name)).toEqual([...names].sort())
    for (const record of listed) expect(record.held).toBe(true)
    // A record from list() releases its lock, encoded key and all.
    expect(await inspector.release(listed[0]!)).toBe(true)
    expect(await inspector.get(listed[0]!.name)).toBeUndefined()
    for (const lock of locks) await lock?.unlock()
  })

  it('an entry that is not 8 bytes reads as held with an unknown lockUntil (the provider cannot take it), and can be released', async () => {
    const inspector = natsLockInspector({ kv })
    const name = unique('stranger')
    await reader.put(name, new TextEncoder().encode('not a lock'))
    expect(await inspector.get(name)).toEqual({
      name,
      lockUntil: undefined,
      lockedAt: undefined,
      lockedBy: undefined,
      held: true,
      remainingMs: undefined,
    })
    await expect(natsLockProvider({ kv }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).rejects.toThrow(
      /not the 8-byte big-endian lockUntil/,
    )
    expect(await inspector.release(name)).toBe(true)
    const lock = await natsLockProvider({ kv }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(lock).toBeDefined()
    await lock!.unlock()
  })

  it('a release by name retries when the holder writes in between; a stale record does not', async () => {
    const inspector = natsLockInspector({ kv })
    const name = unique('extend')
    const provider = natsLockProvider({ kv })
    const holder = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    const seen = await inspector.get(name)
    // The holder extends: a new revision.
    const extended = await (holder as ExtensibleLock).extend('2m', 0)
    expect(extended).toBeDefined()
    expect(await inspector.release(seen!)).toBe(false)
    expect((await inspector.get(name))?.held).toBe(true)
    expect(await inspector.release(name)).toBe(true)
    await extended!.unlock()
  })

  it('names the provider refuses reject with LockConfigurationError, before anything is sent', async () => {
    const inspector = natsLockInspector({ kv })
    await expect(inspector.get('==3A')).rejects.toThrow(LockConfigurationError)
    await expect(inspector.release('x'.repeat(5_000))).rejects.toThrow(LockConfigurationError)
  })

  it('a missing bucket rejects with LockProviderError saying how to create it', async () => {
    const missing = natsLockInspector({ kv: await new Kvm(nc).open(`${bucket}-missing`) })
    await expect(missing.list()).rejects.toThrow(LockProviderError)
    await expect(missing.get('x')).rejects.toThrow(
      /nats: could not inspect lock "x": bucket .*-missing" does not exist .*create it once with/,
    )
  })

  it('a key listing that stalls is stopped and rejects with LockProviderError, within the 5 s stall bound', async () => {
    // The bucket as it is, but keys() delivers one key and then nothing, as a consumer that
    // missed its last pending message does.
    let stopped = false
    const stalling = {
      get: (key: string) => kv.get(key),
      delete: (key: string, options: { previousSeq: number }) => kv.delete(key, options),
      keys: async () => ({
        stop: () => {
          stopped = true
        },
        async *[Symbol.asyncIterator]() {
          yield natsLockKey('first')
          await new Promise(() => undefined)
        },
      }),
    } as unknown as NatsInspectableKv
    const started = Date.now()
    await expect(natsLockInspector({ kv: stalling }).list()).rejects.toThrow(
      /nats: could not list the locks: the bucket's keys delivered nothing for 5000 ms/,
    )
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_900)
    expect(stopped, 'the stalled listing was not stopped').toBe(true)
  }, 15_000)

  it('refuses options without a bucket', () => {
    expect(() => natsLockInspector({} as never)).toThrow(LockConfigurationError)
    expect(() => natsLockInspector({ kv: { get: async () => null } } as never)).toThrow(/pass your JetStream KV bucket/)
  })
})
