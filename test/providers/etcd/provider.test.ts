import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Etcd3 } from 'etcd3'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration, type SimpleLock } from '../../../src/index.ts'
import { etcdLockProvider } from '../../../src/providers/etcd/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { ETCD_URL, etcdOrSkip } from '../../helpers/kv-clients.ts'
import { freePort } from '../../helpers/processes.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

const url = ETCD_URL
const etcd = await etcdOrSkip()

// The TTL etcd really grants for a 1-second lease: it raises TTLs below ceil(1.5 × election
// timeout), 2 s with etcd's default settings.
const minimumTtlSeconds = etcd ? await measureMinimumTtl(etcd) : 1

// The outage test runs its own etcd; scripts/services.sh installs the binary.
const etcdBinary = process.env.SHEDLOCK_ETCD_BIN ?? 'etcd'
const hasEtcdBinary = spawnSync(etcdBinary, ['--version'], { stdio: 'ignore' }).status === 0

describe.skipIf(!etcd)('etcd', () => {
  const client = etcd!
  // Every key of this run is under its own environment, removed at the end.
  const environment = `test-${process.pid}-${randomUUID().slice(0, 8)}`
  const keyOf = (name: string, env = environment): string => `shedlock:${env}:${name}`
  const extraClients: Etcd3[] = []
  const provider = (options: { environment?: string; lockedBy?: string } = {}) =>
    etcdLockProvider({ client, environment, ...options })
  const isLocked = async (name: string): Promise<boolean> => (await client.get(keyOf(name)).string()) !== null
  const leaseOfKey = async (key: string): Promise<string> => {
    const { kvs } = await client.get(key).exec()
    assert.equal(kvs.length, 1, `no key ${key}`)
    return kvs[0]!.lease
  }
  const ttlOf = async (leaseId: string): Promise<{ ttl: number; granted: number }> => {
    const reply = await client.leaseClient.leaseTimeToLive({ ID: leaseId })
    return { ttl: Number(reply.TTL), granted: Number(reply.grantedTTL) }
  }

  afterAll(async () => {
    for (const env of [environment, `${environment}-other`]) {
      const { kvs } = await client.getAll().prefix(`shedlock:${env}:`).exec()
      for (const kv of kvs) if (kv.lease !== '0') await client.leaseClient.leaseRevoke({ ID: kv.lease }).catch(() => {})
      await client.delete().prefix(`shedlock:${env}:`)
    }
    for (const extra of extraClients) extra.close()
    client.close()
  })

  describe('conformance', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => provider(),
        isLocked,
        deleteRecord: async (name) => {
          await client.delete().key(keyOf(name))
        },
        unreachableProvider: () => {
          const dead = new Etcd3({ hosts: 'http://127.0.0.1:1' })
          extraClients.push(dead)
          return etcdLockProvider({ client: dead, environment, timeout: '3s' })
        },
        extensible: true,
        slots: { inspector: true },
        fencing: true,
        // Sleeps scale with the shortest lock etcd keeps: its minimum lease TTL.
        timeGranularityMs: minimumTtlSeconds * 1000,
        // etcd removes keys of expired leases in a pass every 500 ms (seen: up to 0.5 s late).
        expiryLagMs: 1_000,
        // Keys of at most 512 KiB, a third of etcd's default 1.5 MiB request limit.
        maxNameLength: 512 * 1024 - keyOf('').length,
      }),
    )
  })

  describe('limits', () => {
    it('a name too long for one request fails fast with LockConfigurationError, and locks through the same client are not disturbed', async () => {
      // Its own client: an oversized request trips etcd3's circuit breaker for every call of the client.
      const own = new Etcd3({ hosts: url })
      extraClients.push(own)
      const locks = etcdLockProvider({ client: own, environment })
      // Over etcd's 1.5 MiB request limit, and over the 2 MiB gRPC receive limit.
      const tooLong = `long-${randomUUID()}-${'x'.repeat(3_000_000)}`
      const started = Date.now()
      const error = await locks.lock(lockConfiguration({ name: tooLong, lockAtMostFor: '1m' })).catch((e: unknown) => e)
      expect(Date.now() - started).toBeLessThan(1_000)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toContain(tooLong.slice(0, 60))
      for (let i = 0; i < 3; i++) {
        const next = await locks.lock(lockConfiguration({ name: `next-${i}-${randomUUID()}`, lockAtMostFor: '1m' }))
        assert.ok(next, 'a lock on another name right after failed')
        await next.unlock()
      }
    })

    it('refuses, before sending, a lockAtMostFor longer than the longest lease etcd grants (9,000,000,000 s), also on extend', async () => {
      const name = `ttl-limit-${randomUUID()}`
      const longest = 9_000_000_000 * 1000
      const error = await provider()
        .lock(lockConfiguration({ name, lockAtMostFor: longest + 5_000 }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockConfigurationError)
      expect((error as Error).message).toContain(`"${name}"`)
      expect((error as Error).message).toMatch(/9,?000,?000,?000/)
      expect(await isLocked(name)).toBe(false)

      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      await expect(lock.extend(longest + 5_000, 0)).rejects.toBeInstanceOf(LockConfigurationError)
      // The refused extension left the handle usable.
      const extended = await lock.extend(longest - 60_000, 0)
      assert.ok(extended)
      await extended.unlock()
      expect(await isLocked(name)).toBe(false)
    })
  })

  describe('leases and timing', () => {
    it('keeps an early-unlocked lock until lockAtLeastFor (plus lease rounding and etcd expiry pass)', async () => {
      const name = `at-least-${randomUUID()}`
      const atLeast = Math.max(2_000, 2 * minimumTtlSeconds * 1000)
      const configuration = lockConfiguration({ name, lockAtMostFor: 4 * atLeast, lockAtLeastFor: atLeast })
      const lock = await provider().lock(configuration)
      assert.ok(lock)
      await lock.unlock()
      expect(await isLocked(name)).toBe(true)
      expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '5m' }))).toBeUndefined()
      // Whole-second TTL rounding (< 1 s) and etcd's 500 ms expiry pass.
      await sleep(configuration.lockAtLeastUntil.getTime() - Date.now() + 1_500)
      expect(await isLocked(name)).toBe(false)
      const again = await provider().lock(lockConfiguration({ name, lockAtMostFor: '5m' }))
      assert.ok(again)
      await again.unlock()
    }, 30_000)

    it('attaches the key to a lease of lockAtMostFor in whole seconds, rounded up, without keep-alive', async () => {
      const name = `ttl-${randomUUID()}`
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: 61_200 }))
      assert.ok(lock)
      const leaseId = await leaseOfKey(keyOf(name))
      expect(leaseId).not.toBe('0')
      const { granted, ttl } = await ttlOf(leaseId)
      expect(granted).toBe(62)
      await sleep(1_500)
      // Nothing renews the lease: its remaining TTL keeps falling.
      expect((await ttlOf(leaseId)).ttl).toBeLessThan(ttl)
      await lock.unlock()
    })

    it(`raises sub-second and short durations to etcd's minimum lease TTL (${minimumTtlSeconds}s here)`, async () => {
      const name = `short-${randomUUID()}`
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: 300 }))
      assert.ok(lock)
      expect((await ttlOf(await leaseOfKey(keyOf(name)))).granted).toBe(Math.max(1, minimumTtlSeconds))
      await lock.unlock()
    })

    it('revokes the lease of every failed attempt, and the old lease on unlock and extend', async () => {
      const name = `leases-${randomUUID()}`
      const holder = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }))
      assert.ok(holder)
      const first = await leaseOfKey(keyOf(name))
      // Record the leases the losing attempts grant (not the server's whole lease list, which
      // other tests share) and check that each one was revoked.
      const granted: Array<Promise<string>> = []
      const recording = new Proxy(client, {
        get(target, property, receiver) {
          if (property !== 'lease') return Reflect.get(target, property, receiver)
          return (...args: Parameters<Etcd3['lease']>) => {
            const lease = target.lease(...args)
            granted.push(lease.grant())
            return lease
          }
        },
      })
      const other = etcdLockProvider({ client: recording, environment })
      for (let i = 0; i < 10; i++)
        expect(await other.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
      expect(granted).toHaveLength(10)
      for (const id of await Promise.all(granted)) expect((await ttlOf(id)).ttl).toBe(-1)

      // extend: the key moves to a new lease of lockAtMostFor; the old one is revoked
      const extended = await holder.extend('2m', '30s')
      assert.ok(extended)
      const second = await leaseOfKey(keyOf(name))
      expect(second).not.toBe(first)
      expect((await ttlOf(second)).granted).toBe(120)
      expect((await ttlOf(first)).ttl).toBe(-1)

      // unlock inside lockAtLeastFor: the key moves to a lease of what remains of it
      await extended.unlock()
      const third = await leaseOfKey(keyOf(name))
      expect(third).not.toBe(second)
      expect((await ttlOf(third)).granted).toBeLessThanOrEqual(30)
      expect((await ttlOf(third)).granted).toBeGreaterThanOrEqual(25)
      expect((await ttlOf(second)).ttl).toBe(-1)
      await client.leaseClient.leaseRevoke({ ID: third })
    })

    it('deletes the key and revokes the lease on unlock after lockAtLeastFor', async () => {
      const name = `release-${randomUUID()}`
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      const leaseId = await leaseOfKey(keyOf(name))
      await lock.unlock()
      expect(await isLocked(name)).toBe(false)
      expect((await ttlOf(leaseId)).ttl).toBe(-1)
    })
  })

  describe('storage format', () => {
    it("writes Java ShedLock's key and value: shedlock:<environment>:<name> = ADDED:<ISO time>@<owner>", async () => {
      const name = `format:${randomUUID()}`
      const before = Date.now()
      const lock = await etcdLockProvider({ client, environment, lockedBy: 'node-a' }).lock(
        lockConfiguration({ name, lockAtMostFor: '1m' }),
      )
      assert.ok(lock)
      const value = await client.get(`shedlock:${environment}:${name}`).string()
      assert.ok(value)
      const match = /^ADDED:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)@node-a:(\d+):[0-9a-f]{12}$/.exec(value)
      assert.ok(match, `unexpected value ${value}`)
      expect(Number(match[2])).toBe(process.pid)
      expect(Date.parse(match[1]!)).toBeGreaterThanOrEqual(before - 5)
      expect(Date.parse(match[1]!)).toBeLessThanOrEqual(Date.now())
      await lock.unlock()

      const byHost = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(byHost)
      expect(await client.get(keyOf(name)).string()).toContain(`@${hostname()}:${process.pid}:`)
      await byHost.unlock()
    })

    it('respects a key written by Java ShedLock, and takes the lock once Java revoked its lease', async () => {
      const name = `java-${randomUUID()}`
      const javaValue = `ADDED:2024-05-01T10:00:00.000Z@java-host`
      const javaLease = client.lease(60, { autoKeepAlive: false })
      await javaLease.put(keyOf(name)).value(javaValue)
      const ours = provider()
      expect(await ours.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
      expect(await client.get(keyOf(name)).string()).toBe(javaValue)
      // Java's unlock revokes its lease, which deletes the key.
      await javaLease.revoke()
      const lock = await ours.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      await lock.unlock()
      expect(await isLocked(name)).toBe(false)
    })

    it('never releases or extends a key another owner wrote over this acquisition', async () => {
      const name = `owner-${randomUUID()}`
      const first = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      const second = await provider().lock(lockConfiguration({ name: `${name}-b`, lockAtMostFor: '1m' }))
      assert.ok(first && second)
      // An operator deletes the key and a Java node takes the lock.
      await client.delete().key(keyOf(name))
      const javaValue = 'ADDED:2024-05-01T10:00:00.000Z@java-host'
      await client.put(keyOf(name)).value(javaValue)
      await first.unlock()
      expect(await client.get(keyOf(name)).string()).toBe(javaValue)

      await client.delete().key(keyOf(`${name}-b`))
      await client.put(keyOf(`${name}-b`)).value(javaValue)
      expect(await second.extend('1m', 0)).toBeUndefined()
      expect(await client.get(keyOf(`${name}-b`)).string()).toBe(javaValue)
      // The Java key has no lease: the extension did not attach one to it.
      expect(await leaseOfKey(keyOf(`${name}-b`))).toBe('0')
      await client.delete().key(keyOf(name))
      await client.delete().key(keyOf(`${name}-b`))
    })

    it('keeps names as they are in keys, so environments and names never collide', async () => {
      const id = randomUUID().slice(0, 8)
      const names = [`a:${id}`, `a/${id}`, `a ${id}`, `ä-${id}-日本`]
      const locks = []
      for (const name of names) {
        const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
        assert.ok(lock)
        locks.push(lock)
        expect(await client.get(`shedlock:${environment}:${name}`).string()).toMatch(/^ADDED:/)
      }
      // Another environment has its own keys.
      const other = await etcdLockProvider({ client, environment: `${environment}-other` }).lock(
        lockConfiguration({ name: names[0]!, lockAtMostFor: '1m' }),
      )
      assert.ok(other)
      await other.unlock()
      for (const lock of locks) await lock.unlock()
    })
  })

  describe('failures', () => {
    it('a closed client rejects with LockProviderError and a cause', async () => {
      const closed = new Etcd3({ hosts: url })
      closed.close()
      const name = `closed-${randomUUID()}`
      const error = await etcdLockProvider({ client: closed, environment })
        .lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as LockProviderError).message).toContain(`etcd: could not acquire lock "${name}"`)
      expect((error as LockProviderError).cause).toBeDefined()
      expect((error as LockProviderError).provider).toBe('etcd')
    })

    it('a server that accepts connections and never answers rejects after the timeout', async () => {
      const sockets: Socket[] = []
      const silent: Server = createServer((socket) => sockets.push(socket))
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
      const port = (silent.address() as { port: number }).port
      const hung = new Etcd3({ hosts: `http://127.0.0.1:${port}` })
      try {
        const name = `hung-${randomUUID()}`
        const started = Date.now()
        const error = await etcdLockProvider({ client: hung, environment, timeout: '1s' })
          .lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(LockProviderError)
        expect((error as Error).message).toMatch(/did not answer within 1000ms/)
        expect(Date.now() - started).toBeLessThan(10_000)
      } finally {
        hung.close()
        for (const socket of sockets) socket.destroy()
        await new Promise((resolve) => silent.close(resolve))
      }
    })

    it.skipIf(!hasEtcdBinary)(
      `rejects while its server is down and works again once it is back, with the same client${hasEtcdBinary ? '' : ` (no ${etcdBinary} binary)`}`,
      async () => {
        const server = await EtcdServer.start()
        const own = new Etcd3({ hosts: server.url })
        try {
          const locks = etcdLockProvider({ client: own, timeout: '3s' })
          const before = await locks.lock(lockConfiguration({ name: 'before-outage', lockAtMostFor: '1m' }))
          assert.ok(before)
          await server.stop()
          const name = 'during-outage'
          const error = await locks.lock(lockConfiguration({ name, lockAtMostFor: '1m' })).catch((e: unknown) => e)
          expect(error).toBeInstanceOf(LockProviderError)
          expect((error as Error).message).toContain(`"${name}"`)
          const unlockError = await before.unlock().catch((e: unknown) => e)
          expect(unlockError).toBeInstanceOf(LockProviderError)
          await server.restart()
          // etcd3 opens its circuit breaker for 5 s after failures: poll until it lets calls through.
          let after: SimpleLock | undefined
          for (const deadline = Date.now() + 40_000; !after && Date.now() < deadline; ) {
            after = await locks
              .lock(lockConfiguration({ name: 'after-outage', lockAtMostFor: '1m' }))
              .catch(() => undefined)
            if (!after) await sleep(500)
          }
          assert.ok(after, 'the provider did not recover after the server came back')
          await after.unlock()
          // The failed unlock left its handle usable: retried, it releases the lock.
          await before.unlock()
          expect(await own.get('shedlock:default:before-outage').string()).toBeNull()
        } finally {
          own.close()
          await server.destroy()
        }
      },
      90_000,
    )
  })

  describe('bad options', () => {
    it('rejects a missing client, bad environments, lockedBy and timeouts at construction', () => {
      const bad: unknown[] = [
        undefined,
        {},
        { client: {} },
        { client, environment: '' },
        { client, environment: 'a:b' },
        { client, environment: 42 },
        { client, lockedBy: '' },
        { client, lockedBy: '  ' },
        { client, timeout: 0 },
        { client, timeout: 'soon' },
      ]
      for (const options of bad)
        expect(() => etcdLockProvider(options as never), JSON.stringify(options) ?? 'undefined').toThrow(
          LockConfigurationError,
        )
      expect(() =>
        etcdLockProvider({ client, environment: 'production', lockedBy: 'node-1', timeout: '2s' }),
      ).not.toThrow()
    })
  })
})

async function measureMinimumTtl(client: Etcd3): Promise<number> {
  const { ID, TTL } = await client.leaseClient.leaseGrant({ TTL: 1 })
  await client.leaseClient.leaseRevoke({ ID })
  return Math.max(1, Number(TTL))
}

/** A throwaway etcd on free loopback ports, with its own data directory, that a test may stop and restart. */
class EtcdServer {
  readonly url: string
  readonly #args: string[]
  readonly #dir: string
  #process: ChildProcess | undefined

  private constructor(clientPort: number, peerPort: number, dir: string) {
    this.url = `http://127.0.0.1:${clientPort}`
    this.#dir = dir
    const peer = `http://127.0.0.1:${peerPort}`
    this.#args = [
      '--name',
      'shedlock-outage',
      '--data-dir',
      join(dir, 'data'),
      '--listen-client-urls',
      this.url,
      '--advertise-client-urls',
      this.url,
      '--listen-peer-urls',
      peer,
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster',
      `shedlock-outage=${peer}`,
    ]
  }

  static async start(): Promise<EtcdServer> {
    const server = new EtcdServer(await freePort(), await freePort(), mkdtempSync(join(tmpdir(), 'shedlock-etcd-')))
    await server.restart()
    return server
  }

  async restart(): Promise<void> {
    this.#process = spawn(etcdBinary, this.#args, { stdio: 'ignore' })
    for (const deadline = Date.now() + 30_000; ; ) {
      // A fresh client per attempt: a used one keeps its circuit breaker open for 5 s.
      const probe = new Etcd3({ hosts: this.url })
      try {
        await probe.get('probe').string()
        return
      } catch (error) {
        if (Date.now() > deadline || this.#process.exitCode !== null) throw error
        await sleep(200)
      } finally {
        probe.close()
      }
    }
  }

  async stop(): Promise<void> {
    const child = this.#process
    this.#process = undefined
    if (!child || child.exitCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited
  }

  async destroy(): Promise<void> {
    await this.stop()
    rmSync(this.#dir, { recursive: true, force: true })
  }
}
