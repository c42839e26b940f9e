import type { Duration } from '../../../src/core/duration.ts'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { connect as tcpConnect, createServer, type Socket } from 'node:net'
import { hostname } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import fc from 'fast-check'
import memjs, { type ClientOptions, type ServerOptions } from 'memjs'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { memcachedLockKey, memcachedLockProvider } from '../../../src/providers/memcached/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

const where = (process.env.SHEDLOCK_MEMCACHED_URL ?? '127.0.0.1:11211').replace(/^memcached:\/\//, '')
const [host = '127.0.0.1', port = '11211'] = where.split(':')
// memjs logs every failed request to the console; the failures here are on purpose.
const quiet = { logger: { log: () => {} } }
const environment = `test-${process.pid}`

const newClient = (servers: string = where, options: ClientOptions & ServerOptions = {}): memjs.Client =>
  memjs.Client.create(servers, { ...quiet, ...options })

const clients = await connectOrSkip('memcached', `${where} (SHEDLOCK_MEMCACHED_URL)`, async () => {
  const client = newClient()
  try {
    await client.get('shedlock:probe')
  } catch (error) {
    client.close()
    throw error
  }
  // A second client reads and writes the store behind the provider's back.
  return { client, reader: newClient() }
})

const config = (name: string, lockAtMostFor: Duration = '5m', lockAtLeastFor: Duration = 0) =>
  lockConfiguration({ name, lockAtMostFor, lockAtLeastFor })

/**
 * Seconds until memcached expires `key`, from its meta debug command (`me`, memcached 1.6), which
 * reports `exp` as (now − expiry): negative while the item lives, -1 when it never expires (or
 * has one second left). `undefined` for a missing key. Only meaningful for expiries well above a second.
 */
async function secondsToExpiry(key: string): Promise<number | 'never' | undefined> {
  const socket = tcpConnect(Number(port), host)
  await once(socket, 'connect')
  socket.write(`me ${key}\r\n`)
  let reply = ''
  for await (const chunk of socket) {
    reply += String(chunk)
    if (reply.endsWith('\r\n')) break
  }
  socket.destroy()
  if (reply.startsWith('EN')) return undefined
  const exp = Number(/ exp=(-?\d+)/.exec(reply)?.[1])
  assert.ok(Number.isFinite(exp), `unexpected reply to "me": ${reply}`)
  return exp === -1 ? 'never' : -exp
}

describe.skipIf(!clients)('memcached', () => {
  const { client, reader } = clients!
  const keys = new Set<string>()
  const keyOf = (name: string, env = environment): string => {
    const key = memcachedLockKey(name, env)
    keys.add(key)
    return key
  }
  afterAll(async () => {
    for (const key of keys) await reader.delete(key)
    client.close()
    reader.close()
  })

  const isLocked = async (name: string, env = environment): Promise<boolean> =>
    (await reader.get(keyOf(name, env))).value !== null
  const provider = (env = environment) => memcachedLockProvider({ client, environment: env })

  registerSuite(
    lockProviderSuite({
      provider: () => provider(),
      isLocked: (name) => isLocked(name),
      deleteRecord: async (name) => {
        await reader.delete(keyOf(name))
      },
      unreachableProvider: () => memcachedLockProvider({ client: newClient('127.0.0.1:1'), environment }),
      extensible: false,
      // No inspector: memcached cannot list keys, so no catch-up.
      slots: { inspector: false },
      // No fencing tokens: a counter (incr) would be a second request, not atomic with the add, and
      // memcached evicts and forgets keys, so it could start over (docs/providers/memcached.md).
      fencing: false,
      timeGranularityMs: 1000,
      maxNameLength: 250 - Buffer.byteLength(`shedlock:${environment}:`),
    }),
  )

  describe('storage format', () => {
    it("writes Java's key and value: shedlock:<environment>:<name> = ADDED:<ISO time>@<owner>", async () => {
      const name = `format-${randomUUID()}`
      const lock = await provider('default').lock(config(name, '1h'))
      assert.ok(lock)
      const key = keyOf(name, 'default')
      expect(key).toBe(`shedlock:default:${name}`)
      const value = String((await reader.get(key)).value)
      const match = /^ADDED:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)@(.+):(\d+):([0-9a-f]{12})$/.exec(value)
      assert.ok(match, `unexpected value ${value}`)
      expect(Math.abs(Date.parse(match[1]!) - Date.now())).toBeLessThan(60_000)
      expect(match[2]).toBe(hostname())
      expect(match[3]).toBe(String(process.pid))
      const seconds = await secondsToExpiry(key)
      assert.ok(typeof seconds === 'number')
      expect(seconds).toBeGreaterThan(3_500)
      expect(seconds).toBeLessThanOrEqual(3_600)
      await lock.unlock()
      expect(await isLocked(name, 'default')).toBe(false)
    })

    it('respects a lock written by Java ShedLock, and takes the name once the record is gone', async () => {
      const name = `java-${randomUUID()}`
      const key = keyOf(name, 'default')
      const javaValue = 'ADDED:2024-05-01T10:00:00.000Z@java-host'
      expect(await reader.add(key, javaValue, { expires: 60 })).toBe(true)
      expect(await provider('default').lock(config(name))).toBeUndefined()
      expect(String((await reader.get(key)).value)).toBe(javaValue)
      // Java's unlock deletes the record.
      await reader.delete(key)
      const lock = await provider('default').lock(config(name))
      assert.ok(lock)
      await lock.unlock()
    })

    it("uses Java's raw key for a name starting with '%': a Java lock on \"%daily-report\" is honoured, and ours is written there", async () => {
      // Java ShedLock writes the name into the key as it is; memcached holds "%daily-report" as it is.
      const key = `shedlock:${environment}:%daily-report`
      keys.add(key)
      const javaValue = `ADDED:${new Date().toISOString()}@java-host`
      expect(await reader.add(key, javaValue, { expires: 60 })).toBe(true)
      expect(memcachedLockKey('%daily-report', environment)).toBe(key)
      expect(await provider().lock(config('%daily-report'))).toBeUndefined()
      expect(String((await reader.get(key)).value)).toBe(javaValue)

      const ours = `shedlock:${environment}:%weekly-report`
      keys.add(ours)
      const lock = await provider().lock(config('%weekly-report', '1h'))
      assert.ok(lock)
      expect(String((await reader.get(ours)).value)).toMatch(/^ADDED:/)
      await lock.unlock()
      expect((await reader.get(ours)).value).toBeNull()
    })

    it("does not release a lock that another node took after this one's record vanished", async () => {
      const name = `owner-${randomUUID()}`
      const key = keyOf(name, 'default')
      const lock = await provider('default').lock(config(name, '1h'))
      assert.ok(lock)
      // The record was evicted, and a Java node added its own.
      await reader.delete(key)
      const javaValue = 'ADDED:2024-05-01T10:00:00.000Z@java-host'
      await reader.add(key, javaValue, { expires: 60 })
      await lock.unlock()
      expect(String((await reader.get(key)).value)).toBe(javaValue)
    })

    it('an unlock shortens the record to what remains of lockAtLeastFor', async () => {
      const name = `at-least-${randomUUID()}`
      const lock = await provider().lock(config(name, '1h', '10m'))
      assert.ok(lock)
      await lock.unlock()
      const seconds = await secondsToExpiry(keyOf(name))
      assert.ok(typeof seconds === 'number')
      expect(seconds).toBeGreaterThan(500)
      expect(seconds).toBeLessThanOrEqual(600)
    })

    it('an unlock within 2 s of lockAtMostUntil leaves the record to expire by itself', async () => {
      const name = `guard-${randomUUID()}`
      const lock = await provider().lock(config(name, 1500))
      assert.ok(lock)
      await lock.unlock()
      expect(await isLocked(name)).toBe(true)
      await sleep(2_500)
      expect(await isLocked(name)).toBe(false)
    })
  })

  describe('expiry', () => {
    // (lockConfiguration() refuses a lockAtMostFor of 0; 1 ms is the shortest.)
    for (const lockAtMostFor of [1, 300]) {
      it(`a ${lockAtMostFor} ms lockAtMostFor expires within a second or two, not never (memcached's 0)`, async () => {
        const name = `sub-second-${lockAtMostFor}-${randomUUID()}`
        // A 1 ms configuration can expire before the provider looks at it on a loaded machine
        // (LockConfigurationError, nothing sent): build a fresh one and send it again.
        const lockFresh = async () => {
          for (let attempt = 1; ; attempt++) {
            try {
              return await provider().lock(config(name, lockAtMostFor))
            } catch (error) {
              if (!(error instanceof LockConfigurationError) || attempt === 20) throw error
            }
          }
        }
        const lock = await lockFresh()
        assert.ok(lock)
        // (memcached's `me` shows 1 s left and "never" alike, as exp=-1: only waiting tells them apart.)
        await sleep(2_100)
        expect(await isLocked(name)).toBe(false)
        const next = await lockFresh()
        assert.ok(next)
      })
    }

    it('a lockAtMostFor over 30 days is sent as an absolute time, so the record lives that long', async () => {
      // Sent as seconds, 31 days would read as a Unix time in January 1970: expired at once.
      for (const [duration, seconds] of [
        ['30d', 2_592_000],
        ['31d', 2_678_400],
        ['400d', 34_560_000],
      ] as const) {
        const name = `long-${duration}-${randomUUID()}`
        const lock = await provider().lock(config(name, duration))
        assert.ok(lock, duration)
        expect(await isLocked(name)).toBe(true)
        expect(await provider().lock(config(name))).toBeUndefined()
        const left = await secondsToExpiry(keyOf(name))
        assert.ok(typeof left === 'number', `${duration}: ${String(left)}`)
        // memcached converts absolute times with its own start time: allow a few seconds either way.
        expect(Math.abs(left - seconds)).toBeLessThan(10)
        await lock.unlock()
        expect(await isLocked(name)).toBe(false)
      }
    })

    it('refuses, before sending, a lockAtMostUntil after the last expiration memcached holds (2106-02-07T06:28:15Z); that one is held', async () => {
      // memcached expirations beyond 30 days are 32-bit Unix times in seconds.
      const last = Date.UTC(2106, 1, 7, 6, 28, 15)
      expect(last).toBe(0xffff_ffff * 1000)
      const name = `last-${randomUUID()}`
      const tooLate = lockConfiguration({ name, lockAtMostFor: last + 1 - Date.now() })
      const error = await provider()
        .lock(tooLate)
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toContain(`"${name}"`)
      expect((error as Error).message).toContain('2106-02-07T06:28:15')
      expect(await isLocked(name)).toBe(false)

      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: last - Date.now() }))
      assert.ok(lock)
      expect(await isLocked(name)).toBe(true)
      expect(await provider().lock(config(name))).toBeUndefined()
      await lock.unlock()
      expect(await isLocked(name)).toBe(false)
    })

    it('a lockAtLeastFor over 30 days is kept after unlock', async () => {
      const name = `long-at-least-${randomUUID()}`
      const lock = await provider().lock(config(name, '40d', '35d'))
      assert.ok(lock)
      await lock.unlock()
      expect(await isLocked(name)).toBe(true)
      const left = await secondsToExpiry(keyOf(name))
      assert.ok(typeof left === 'number')
      expect(Math.abs(left - 35 * 86_400)).toBeLessThan(10)
    })
  })

  describe('names and options', () => {
    it('keeps names memcached accepts as they are and encodes the others injectively', () => {
      expect(memcachedLockKey('report:daily/eu')).toBe('shedlock:default:report:daily/eu')
      expect(memcachedLockKey('été-日本-😀', 'prod')).toBe('shedlock:prod:été-日本-😀')
      expect(memcachedLockKey('a%20b')).toBe('shedlock:default:a%20b')
      expect(memcachedLockKey('daily report')).toBe('shedlock:default:%daily%20report')
      expect(memcachedLockKey('tab\there')).toBe('shedlock:default:%tab%09here')
      expect(memcachedLockKey('100% done')).toBe('shedlock:default:%100%25%20done')
      // A leading '%' is held as it is, as Java writes it.
      expect(memcachedLockKey('%x')).toBe('shedlock:default:%x')
      expect(memcachedLockKey('%a%41')).toBe('shedlock:default:%a%41')
      expect(memcachedLockKey('%a%25')).toBe('shedlock:default:%a%25')
      const names = ['a b', 'a%20b', '%a b', '%', '%%25', ' ', '%20', '%x', '%a%2x']
      expect(new Set(names.map((n) => memcachedLockKey(n))).size).toBe(names.length)
      expect(() => memcachedLockKey('x'.repeat(234))).toThrow(LockConfigurationError)
      expect(() => memcachedLockKey('bad \ud800')).toThrow(LockConfigurationError)
    })

    it('no two names share a key: every name gets its own key or is refused', () => {
      // Names made of the characters the encoding turns on, so that collisions would show.
      const tricky = fc.string({
        unit: fc.constantFrom('%', '2', '0', '5', '7', 'F', '9', ' ', '\t', 'a'),
        minLength: 1,
        maxLength: 7,
      })
      const keyOf = (name: string): string | undefined => {
        try {
          return memcachedLockKey(name)
        } catch (error) {
          expect(error).toBeInstanceOf(LockConfigurationError)
          return undefined
        }
      }
      fc.assert(
        fc.property(tricky, tricky, (a, b) => {
          const [keyA, keyB] = [keyOf(a), keyOf(b)]
          if (a !== b && keyA !== undefined && keyB !== undefined) expect(keyA).not.toBe(keyB)
        }),
        { numRuns: 5_000 },
      )
      // The name spelled like another name's encoded key (the only candidate for a collision) is refused.
      fc.assert(
        fc.property(tricky, (name) => {
          const suffix = keyOf(name)?.slice('shedlock:default:'.length)
          if (suffix !== undefined && suffix !== name) expect(keyOf(suffix), suffix).toBeUndefined()
        }),
        { numRuns: 5_000 },
      )
      // And every key memcached holds is the key of exactly one name, or of none.
      fc.assert(
        fc.property(
          tricky.filter((key) => !/[\s]/.test(key)),
          (raw) => {
            const key = keyOf(raw)
            if (key !== undefined) expect(key).toBe(`shedlock:default:${raw}`)
          },
        ),
      )
    })

    it("refuses, before sending, a name that is exactly another name's encoded key", async () => {
      // "%daily%20report" is the key of "daily report", which memcached cannot hold as it is.
      expect(memcachedLockKey('daily report', environment)).toBe(`shedlock:${environment}:%daily%20report`)
      for (const name of ['%daily%20report', '%%20', '%a%09b%25']) {
        expect(() => memcachedLockKey(name), name).toThrow(LockConfigurationError)
        const error = await provider()
          .lock(config(name))
          .catch((e: unknown) => e)
        expect(error, name).toBeInstanceOf(LockConfigurationError)
        expect((error as Error).message).toContain(JSON.stringify(name))
      }
      expect((await reader.get(`shedlock:${environment}:%daily%20report`)).value).toBeNull()
    })

    it('locks names with spaces and non-ASCII letters under their keys', async () => {
      const id = randomUUID()
      for (const name of [`nightly report ${id}`, `%${id}`, `%${id} %`, `Überweisung-日本-${id}`]) {
        const lock = await provider().lock(config(name))
        assert.ok(lock, name)
        expect((await reader.get(keyOf(name))).value).not.toBeNull()
        expect(await provider().lock(config(name))).toBeUndefined()
        await lock.unlock()
        expect(await isLocked(name)).toBe(false)
      }
    })

    it('rejects bad options with LockConfigurationError before touching the store', () => {
      for (const env of ['', 'a b', 'a:b', 'tab\t', 'new\nline', 'x'.repeat(240), 42]) {
        expect(() => memcachedLockProvider({ client, environment: env as string }), JSON.stringify(env)).toThrow(
          LockConfigurationError,
        )
      }
      expect(() => memcachedLockKey('x', 'a:b')).toThrow(LockConfigurationError)
      expect(() => memcachedLockProvider({} as never)).toThrow(LockConfigurationError)
      expect(() => memcachedLockProvider({ client: { get: async () => ({ value: null }) } } as never)).toThrow(
        LockConfigurationError,
      )
      expect(() => memcachedLockProvider({ client, timeout: 0 })).toThrow(LockConfigurationError)
      expect(() => memcachedLockProvider({ client, timeout: 'soon' as Duration })).toThrow(LockConfigurationError)
    })
  })

  describe('failures', () => {
    it('a connection the server closes mid-request (memjs never calls back) rejects after `timeout`', async () => {
      // Reads a request, then closes the connection: memjs drops the request without an error.
      const sockets = new Set<Socket>()
      const server = createServer((socket) => {
        sockets.add(socket)
        socket.on('data', () => socket.end())
      })
      server.listen(0, '127.0.0.1')
      await once(server, 'listening')
      const { port: hangPort } = server.address() as { port: number }
      const hanging = newClient(`127.0.0.1:${hangPort}`)
      try {
        const error = await memcachedLockProvider({ client: hanging, timeout: 500 })
          .lock(config('hung-up'))
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        expect((error as Error).message).toContain(
          'memcached: could not acquire lock "hung-up": memcached is unreachable',
        )
        expect((error as Error).message).toContain('did not answer within 500ms')
      } finally {
        hanging.close()
        for (const socket of sockets) socket.destroy()
        server.close()
      }
    })
  })
})
