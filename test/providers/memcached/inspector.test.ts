import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import fc from 'fast-check'
import memjs from 'memjs'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { memcachedLockName } from '../../../src/providers/memcached/format.ts'
import {
  memcachedLockInspector,
  memcachedLockKey,
  memcachedLockProvider,
} from '../../../src/providers/memcached/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

const where = (process.env.SHEDLOCK_MEMCACHED_URL ?? '127.0.0.1:11211').replace(/^memcached:\/\//, '')
// memjs logs every failed request to the console; the failures here are on purpose.
const quiet = { logger: { log: () => {} } }
const clients = await connectOrSkip('memcached', `${where} (SHEDLOCK_MEMCACHED_URL)`, async () => {
  const client = memjs.Client.create(where, quiet)
  try {
    await client.get('shedlock:probe')
  } catch (error) {
    client.close()
    throw error
  }
  // A second client reads and writes the store behind the inspector's back.
  return { client, reader: memjs.Client.create(where, quiet) }
})

describe('memcachedLockName', () => {
  it('is the inverse of memcachedLockKey: raw names, escaped names, and keys no name has', () => {
    for (const name of [
      'report:daily/eu',
      'été-日本-😀',
      'a%20b',
      'daily report',
      'tab\there',
      '100% done',
      '%x',
      '%a%41',
    ]) {
      expect(memcachedLockName(memcachedLockKey(name, 'prod'), 'prod'), name).toBe(name)
    }
    // Another environment, the encoded form of a name taken as a raw name, a '%' that is no escape.
    expect(memcachedLockName('shedlock:other:x', 'prod')).toBeUndefined()
    expect(memcachedLockName('shedlock:prod:%daily%20report', 'prod')).toBe('daily report')
    expect(memcachedLockName('shedlock:prod:%daily%2', 'prod')).toBe('%daily%2')
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.constantFrom('%', '2', '0', '5', '7', 'F', ' ', '\t', 'a', 'é'),
          minLength: 1,
          maxLength: 8,
        }),
        (name) => {
          let key: string
          try {
            key = memcachedLockKey(name)
          } catch {
            return
          }
          expect(memcachedLockName(key)).toBe(name)
        },
      ),
      { numRuns: 3_000 },
    )
  })
})

describe.skipIf(!clients)('memcachedLockInspector', () => {
  const { client, reader } = clients!
  const environment = `inspect-${process.pid}-${randomUUID().slice(0, 8)}`
  const keys = new Set<string>()
  const keyOf = (name: string): string => {
    const key = memcachedLockKey(name, environment)
    keys.add(key)
    return key
  }
  afterAll(async () => {
    for (const key of keys) await reader.delete(key)
    client.close()
    reader.close()
  })
  const provider = () => memcachedLockProvider({ client, environment })
  const inspector = memcachedLockInspector({ client, environment })

  registerInspectorSuite(
    lockInspectorSuite({
      provider,
      inspector,
      canList: false,
      keepsLockUntil: false,
      timeGranularityMs: 1000,
    }),
  )

  it('list() rejects with LockProviderError saying memcached cannot enumerate its keys', async () => {
    await expect(inspector.list()).rejects.toThrow(LockProviderError)
    await expect(inspector.list()).rejects.toThrow(
      /^memcached: could not list the locks: memcached cannot enumerate its keys/,
    )
  })

  it('a force-release deletes the key; the holder’s unlock within lockAtLeastFor does not bring it back', async () => {
    const name = `deleted-${randomUUID()}`
    const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }))
    assert.ok(lock)
    expect(await inspector.release(name)).toBe(true)
    expect((await reader.get(keyOf(name))).value).toBeNull()
    await lock.unlock()
    expect((await reader.get(keyOf(name))).value).toBeNull()
    expect(await inspector.get(name)).toBeUndefined()
    expect(await inspector.release(name)).toBe(false)
  })

  it('reads a lock written by Java ShedLock, and releases a record only while the key holds the value read', async () => {
    const name = `java-${randomUUID()}`
    expect(await reader.add(keyOf(name), 'ADDED:2024-05-01T10:00:00.000Z@java-host', { expires: 60 })).toBe(true)
    const record = await inspector.get(name)
    expect(record).toEqual({
      name,
      lockUntil: undefined,
      lockedAt: new Date('2024-05-01T10:00:00.000Z'),
      lockedBy: 'java-host',
      held: true,
      remainingMs: undefined,
    })
    expect(await reader.replace(keyOf(name), 'ADDED:2024-05-01T10:00:01.000Z@other-java-host', { expires: 60 })).toBe(
      true,
    )
    expect(await inspector.release(record!)).toBe(false)
    expect(String((await reader.get(keyOf(name))).value)).toBe('ADDED:2024-05-01T10:00:01.000Z@other-java-host')
    expect(await inspector.release((await inspector.get(name))!)).toBe(true)
    expect((await reader.get(keyOf(name))).value).toBeNull()
  })

  it('reads and releases names that need key escaping, and names starting with % as Java writes them', async () => {
    for (const name of [
      `daily report ${randomUUID()}`,
      `tab\there ${randomUUID()}`,
      `%raw-${randomUUID()}`,
      `100% done ${randomUUID()}`,
    ]) {
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock, name)
      expect((await reader.get(keyOf(name))).value, name).not.toBeNull()
      expect(await inspector.get(name), name).toMatchObject({ name, held: true })
      expect(await inspector.release(name), name).toBe(true)
      expect((await reader.get(keyOf(name))).value, name).toBeNull()
    }
    // The escaped form of another name is no lock name: the caller is told, before anything is sent.
    await expect(inspector.get('%daily%20report')).rejects.toThrow(LockConfigurationError)
  })

  it('refuses bad options with LockConfigurationError; an unreachable server rejects with LockProviderError', async () => {
    for (const options of [{ environment: 'a:b' }, { environment: 'a b' }, { timeout: 0 }]) {
      expect(() => memcachedLockInspector({ client, ...options } as never), JSON.stringify(options)).toThrow(
        LockConfigurationError,
      )
    }
    expect(() => memcachedLockInspector({ client: {} } as never)).toThrow(/pass your memjs client/)
    const dead = memjs.Client.create('127.0.0.1:1', { ...quiet, retries: 0, timeout: 0.5 })
    try {
      await expect(memcachedLockInspector({ client: dead, environment }).get('x')).rejects.toThrow(
        /^memcached: could not inspect lock "x": memcached is unreachable/,
      )
    } finally {
      dead.close()
    }
  })
})
