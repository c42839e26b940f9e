import type { Duration } from '../../../src/core/duration.ts'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { jetstreamManager } from '@nats-io/jetstream'
import { type KV, Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLockingTaskExecutor,
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import { natsLockKey, natsLockProvider } from '../../../src/providers/nats/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

const url = process.env.SHEDLOCK_NATS_URL ?? 'nats://127.0.0.1:4222'
const bucket = `shedlock-test-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`

const nats = await connectOrSkip('nats', `${url} (SHEDLOCK_NATS_URL)`, async () => {
  const nc = await connect({ servers: url, timeout: 3000 })
  try {
    // Fails unless JetStream is enabled.
    await jetstreamManager(nc)
    // A second connection reads and writes the store behind the providers' back.
    return { nc, readerNc: await connect({ servers: url, timeout: 3000 }) }
  } catch (error) {
    await nc.close()
    throw error
  }
})

const config = (name: string, lockAtMostFor: Duration = '5m', lockAtLeastFor: Duration = 0) =>
  lockConfiguration({ name, lockAtMostFor, lockAtLeastFor })

/** Java ShedLock's value: `ByteBuffer.allocate(8).putLong(lockUntil)`. */
function javaValue(lockUntil: number): Uint8Array {
  const buffer = Buffer.alloc(8)
  buffer.writeBigInt64BE(BigInt(lockUntil))
  return new Uint8Array(buffer)
}

function lockUntilOf(value: Uint8Array): number {
  assert.equal(value.length, 8, 'the value is not 8 bytes')
  return Number(Buffer.from(value).readBigInt64BE(0))
}

describe.skipIf(!nats)('nats', () => {
  const { nc, readerNc } = nats!
  // The bucket is created here, not at import, so that a filtered run that skips this block leaves none behind.
  let kv: KV
  let reader: KV
  beforeAll(async () => {
    kv = await new Kvm(nc).create(bucket)
    // open() binds without direct get: reads come from the stream leader, never a stale replica.
    reader = await new Kvm(readerNc).open(bucket)
  })
  afterAll(async () => {
    await kv?.destroy()
    await nc.close()
    await readerNc.close()
  })

  const isLocked = async (name: string): Promise<boolean> => {
    const entry = await reader.get(natsLockKey(name))
    return entry !== null && entry.operation === 'PUT' && lockUntilOf(entry.value) > Date.now()
  }

  registerSuite(
    lockProviderSuite({
      provider: () => natsLockProvider({ kv }),
      isLocked,
      deleteRecord: async (name) => {
        await reader.delete(natsLockKey(name))
      },
      unreachableProvider: async () => {
        const closed = await connect({ servers: url, timeout: 3000 })
        const closedKv = await new Kvm(closed).open(bucket)
        await closed.close()
        return natsLockProvider({ kv: closedKv })
      },
      extensible: true,
      slots: { inspector: true },
      fencing: true,
      // The longest subject, a direct get $JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>.<key>, stays
      // within 3,840 characters: 3,812 minus twice the bucket name for the key.
      maxNameLength: 3812 - 2 * bucket.length,
    }),
  )

  describe('storage format', () => {
    it("stores lockUntil as Java's 8-byte big-endian epoch milliseconds, and deletes the entry on unlock", async () => {
      const name = `format-${randomUUID()}`
      const configuration = config(name, '1h')
      const lock = await natsLockProvider({ kv }).lock(configuration)
      assert.ok(lock)
      const entry = await reader.get(name)
      assert.ok(entry)
      expect(entry.operation).toBe('PUT')
      expect(entry.value).toEqual(javaValue(configuration.lockAtMostUntil.getTime()))
      await lock.unlock()
      expect((await reader.get(name))?.operation).toBe('DEL')
    })

    it('keeps the entry until lockAtLeastUntil after an early unlock', async () => {
      const name = `at-least-${randomUUID()}`
      const configuration = config(name, '1h', '10m')
      const lock = await natsLockProvider({ kv }).lock(configuration)
      assert.ok(lock)
      await lock.unlock()
      const entry = await reader.get(name)
      assert.ok(entry)
      expect(lockUntilOf(entry.value)).toBe(configuration.lockAtLeastUntil.getTime())
      expect(await natsLockProvider({ kv }).lock(config(name))).toBeUndefined()
    })

    it('respects a lock written by Java ShedLock and takes over an expired one', async () => {
      const held = `com.example/Java_Job=held-${randomUUID()}`
      const expired = `com.example/Java_Job=expired-${randomUUID()}`
      const heldUntil = Date.now() + 3_600_000
      // Java names made of key characters are keys as they are: both sides address one entry.
      expect(natsLockKey(held)).toBe(held)
      await reader.create(held, javaValue(heldUntil))
      await reader.create(expired, javaValue(Date.now() - 86_400_000))
      const provider = natsLockProvider({ kv })

      expect(await provider.lock(config(held))).toBeUndefined()
      expect(lockUntilOf((await reader.get(held))!.value)).toBe(heldUntil)

      const configuration = config(expired, '1h')
      const lock = await provider.lock(configuration)
      assert.ok(lock)
      expect(lockUntilOf((await reader.get(expired))!.value)).toBe(configuration.lockAtMostUntil.getTime())
      await lock.unlock()
      expect((await reader.get(expired))?.operation).toBe('DEL')
    })

    it('leaves alone a lock that a Java node took after ours expired (no owner is stored: the revision decides)', async () => {
      const name = `taken-over-${randomUUID()}`
      const provider = natsLockProvider({ kv })
      const stale = await provider.lock(config(name, 300))
      assert.ok(stale)
      await sleep(400)
      // What Java does on lock(): get, see lockUntil <= now, update with the entry's revision.
      const entry = await reader.get(name)
      assert.ok(entry)
      const javaUntil = Date.now() + 3_600_000
      await reader.update(name, javaValue(javaUntil), entry.revision)
      await stale.unlock()
      expect(lockUntilOf((await reader.get(name))!.value)).toBe(javaUntil)
    })

    it('an extension does not overwrite an entry rewritten by someone else while the lock was held', async () => {
      const name = `rewritten-${randomUUID()}`
      const lock = await natsLockProvider({ kv }).lock(config(name, '1h'))
      assert.ok(lock)
      // A node with a clock far ahead believed the lock expired and took it.
      const entry = await reader.get(name)
      const theirs = Date.now() + 7_200_000
      await reader.update(name, javaValue(theirs), entry!.revision)
      expect(await (lock as ExtensibleLock).extend('2h', 0)).toBeUndefined()
      expect(lockUntilOf((await reader.get(name))!.value)).toBe(theirs)
    })

    it('takes a lock whose entry was purged', async () => {
      const name = `purged-${randomUUID()}`
      const provider = natsLockProvider({ kv })
      const first = await provider.lock(config(name))
      assert.ok(first)
      await reader.purge(name)
      expect((await reader.get(name))?.operation).toBe('PURGE')
      const second = await provider.lock(config(name))
      assert.ok(second)
      expect(await isLocked(name)).toBe(true)
      await second.unlock()
    })

    it('rejects an entry that is not an 8-byte lockUntil with LockProviderError naming the lock', async () => {
      const name = `garbage-${randomUUID()}`
      await reader.put(name, 'not a lock')
      const error = await natsLockProvider({ kv })
        .lock(config(name))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain(`"${name}"`)
      expect((error as Error).message).toContain('8-byte')
    })
  })

  describe('names', () => {
    it('keeps names the server holds as they are and encodes the others injectively', () => {
      expect(natsLockKey('report.daily/eu-west_1=x')).toBe('report.daily/eu-west_1=x')
      expect(natsLockKey('report:daily')).toBe('=report=3Adaily')
      expect(natsLockKey('daily report')).toBe('=daily=20report')
      expect(natsLockKey('été')).toBe('==C3=A9t=C3=A9')
      expect(natsLockKey('日本')).toBe('==E6=97=A5=E6=9C=AC')
      expect(natsLockKey('😀')).toBe('==F0=9F=98=80')
      // Names the key syntax would accept but the server cannot store.
      expect(natsLockKey('a..b')).toBe('=a=2E=2Eb')
      expect(natsLockKey('.a')).toBe('==2Ea')
      expect(natsLockKey('a.')).toBe('=a=2E')
      // A name starting with '=' that the server holds is its own key, as in Java.
      expect(natsLockKey('=3A')).toBe('=3A')
      expect(natsLockKey('=')).toBe('=')
      expect(natsLockKey('=a.b')).toBe('=a.b')
      expect(natsLockKey('*')).toBe('==2A')
      expect(natsLockKey('>')).toBe('==3E')
      const names = [
        ':',
        '=3A',
        '==3D3A',
        '%3A',
        ' ',
        '=20',
        'a.b',
        'a=2Eb',
        '=a=2Eb',
        '=a.b',
        'é',
        '=C3=A9',
        '=',
        '==3D',
      ]
      expect(new Set(names.map(natsLockKey)).size).toBe(names.length)
      expect(() => natsLockKey('bad \ud800')).toThrow(LockConfigurationError)
    })

    it('locks names with spaces, dots and non-ASCII letters under their encoded keys', async () => {
      const id = randomUUID()
      const names = [`nightly report ${id}`, `a..b-${id}`, `=${id}`, `Überweisung-${id}`, `${id}.`]
      const provider = natsLockProvider({ kv })
      for (const name of names) {
        const lock = await provider.lock(config(name))
        assert.ok(lock, name)
        expect(await reader.get(natsLockKey(name))).not.toBeNull()
        expect(await provider.lock(config(name))).toBeUndefined()
        await lock.unlock()
        expect(await isLocked(name)).toBe(false)
      }
    })

    it("uses Java's raw key for a name starting with '=': a Java lock on \"=daily\" is honoured, and ours is written there", async () => {
      // Java ShedLock writes the name as the key; the server holds "=daily" as it is.
      await reader.create('=daily', javaValue(Date.now() + 3_600_000))
      expect(natsLockKey('=daily')).toBe('=daily')
      const provider = natsLockProvider({ kv })
      expect(await provider.lock(config('=daily'))).toBeUndefined()
      const configuration = config('=weekly', '1h')
      const lock = await provider.lock(configuration)
      assert.ok(lock)
      expect(lockUntilOf((await reader.get('=weekly'))!.value)).toBe(configuration.lockAtMostUntil.getTime())
      await lock.unlock()
      expect((await reader.get('=weekly'))?.operation).toBe('DEL')
    })

    it("refuses, before sending, a name that is exactly another name's encoded key", async () => {
      // "==3A" is the key of ":", which the server cannot hold as it is.
      expect(natsLockKey(':')).toBe('==3A')
      expect(() => natsLockKey('==3A')).toThrow(LockConfigurationError)
      const error = await natsLockProvider({ kv })
        .lock(config('==3A'))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toContain('"==3A"')
      expect((error as Error).message).toContain('":"')
      expect(await reader.get('==3A')).toBeNull()
    })

    it('a name with a lone surrogate is refused by lockConfiguration(), before any store', () => {
      expect(() => config('bad \udc00 name')).toThrow(LockConfigurationError)
    })
  })

  describe('name length', () => {
    it('a name too long for a subject fails fast with LockConfigurationError, and locks on the same connection are not disturbed', async () => {
      // Its own connection, so that a dropped one would not disturb the other tests.
      const own = await connect({ servers: url, timeout: 3000 })
      try {
        const provider = natsLockProvider({ kv: await new Kvm(own).create(bucket) })
        // About 4,050 characters: over the server's 4 KB max_control_line once in a subject,
        // which makes the server close the whole connection.
        const tooLong = `long-${randomUUID()}-${'x'.repeat(4_060)}`
        const other = `other-${randomUUID()}`
        const started = Date.now()
        const [refused, concurrent] = await Promise.allSettled([
          provider.lock(config(tooLong)),
          provider.lock(config(other)),
        ])
        expect(Date.now() - started).toBeLessThan(1_000)
        assert.equal(refused.status, 'rejected')
        expect(refused.reason).toBeInstanceOf(LockConfigurationError)
        expect((refused.reason as Error).message).toContain(tooLong.slice(0, 60))
        expect((refused.reason as Error).message).toMatch(/3,?\d{3}/)
        assert.equal(concurrent.status, 'fulfilled')
        assert.ok(concurrent.value, 'a lock on another name, sent alongside, failed')
        await concurrent.value.unlock()
        const next = await provider.lock(config(`next-${randomUUID()}`))
        assert.ok(next, 'a lock on another name right after failed')
        await next.unlock()
      } finally {
        await own.close()
      }
    })
  })

  describe('failures', () => {
    it('rejects bad options with LockConfigurationError', () => {
      expect(() => natsLockProvider({} as never)).toThrow(LockConfigurationError)
      expect(() => natsLockProvider({ kv: { get: async () => null } } as never)).toThrow(LockConfigurationError)
      expect(() => natsLockProvider({ kv, clock: {} as never })).toThrow(LockConfigurationError)
      // A bucket name so long that its subjects leave no room for a key.
      const named = (bucketName: string) => ({
        get: kv.get.bind(kv),
        create: kv.create.bind(kv),
        update: kv.update.bind(kv),
        delete: kv.delete.bind(kv),
        bucket: bucketName,
      })
      expect(() => natsLockProvider({ kv: named('b'.repeat(1_906)) })).toThrow(/bucket name .* is too long/)
      expect(() => natsLockProvider({ kv: named('b'.repeat(1_905)) })).not.toThrow()
    })

    it('a closed connection rejects with LockProviderError, and the task does not run', async () => {
      const closed = await connect({ servers: url, timeout: 3000 })
      const closedKv = await new Kvm(closed).open(bucket)
      await closed.close()
      const provider = natsLockProvider({ kv: closedKv })
      const error = await provider.lock(config('closed-connection')).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as LockProviderError).provider).toBe('nats')
      expect((error as Error).message).toMatch(
        /nats: could not acquire lock "closed-connection": the NATS connection is closed/,
      )
      expect((error as Error).cause).toBeDefined()
      let ran = false
      await expect(
        createLockingTaskExecutor(provider).executeWithLock(() => {
          ran = true
        }, config('closed-connection')),
      ).rejects.toThrow(LockProviderError)
      expect(ran).toBe(false)
    })

    it('a missing bucket rejects with LockProviderError that says how to create it', async () => {
      const missing = await new Kvm(readerNc).open(`shedlock-missing-${process.pid}`)
      const error = await natsLockProvider({ kv: missing })
        .lock(config('no-bucket'))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain('does not exist')
      expect((error as Error).message).toContain('new Kvm(nc).create(')
    })
  })
})
