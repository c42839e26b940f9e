import type { Duration } from '../../../src/core/duration.ts'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { connect as tcp, createServer, type Server, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import zookeeper from 'node-zookeeper-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLockingTaskExecutor,
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import { zookeeperLockProvider, zookeeperNodeName } from '../../../src/providers/zookeeper/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { freePort } from '../../helpers/processes.ts'
import { registerSuite } from '../../helpers/register-suite.ts'

type Client = zookeeper.Client

const url = process.env.SHEDLOCK_ZOOKEEPER_URL ?? '127.0.0.1:2181'
const clients: Client[] = []

/** A connected client, or a rejection after `ms`. */
async function connect(where: string, ms = 10_000): Promise<Client> {
  const client = zookeeper.createClient(where, { sessionTimeout: 30_000, spinDelay: 200 })
  clients.push(client)
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.close()
      reject(new Error(`no connection within ${ms}ms`))
    }, ms)
    client.once('connected', () => {
      clearTimeout(timer)
      resolve()
    })
    client.connect()
  })
  return client
}

// The provider's client and, separately, the test's own view of the store.
const store = await connectOrSkip('zookeeper', `${url} (SHEDLOCK_ZOOKEEPER_URL)`, async () => ({
  client: await connect(url),
  reader: await connect(url),
}))

/** node-zookeeper-client's callbacks as promises, for the test's direct reads and writes. */
function direct(client: Client) {
  const call = <T>(start: (done: (error: unknown, value?: T) => void) => void): Promise<T> =>
    new Promise((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))))
  return {
    getData: (path: string) =>
      new Promise<{ data: string; version: number } | undefined>((resolve, reject) =>
        client.getData(path, (error, data, stat) => {
          if ((error as { code?: number } | null)?.code === zookeeper.Exception.NO_NODE) resolve(undefined)
          else if (error) reject(error)
          else resolve({ data: data ? data.toString('utf8') : '', version: stat.version })
        }),
      ),
    create: (path: string, data: string | undefined, mode = zookeeper.CreateMode.PERSISTENT) =>
      call<string>((done) =>
        data === undefined ? client.create(path, mode, done) : client.create(path, Buffer.from(data), mode, done),
      ),
    setData: (path: string, data: string) => call<unknown>((done) => client.setData(path, Buffer.from(data), -1, done)),
    mkdirp: (path: string) => call<string>((done) => client.mkdirp(path, done)),
    remove: (path: string) => call<void>((done) => client.remove(path, -1, done)),
    children: (path: string) => call<string[]>((done) => client.getChildren(path, done)),
  }
}

/**
 * A TCP proxy on its own loopback port in front of the real ZooKeeper: `cut()` drops every
 * connection and refuses new ones, as a dead server or network would; `restore()` accepts again.
 */
class Outage {
  readonly address: string
  readonly #port: number
  readonly #upstream: { host: string; port: number }
  readonly #sockets = new Set<Socket>()
  #server: Server | undefined

  private constructor(port: number, upstream: { host: string; port: number }) {
    this.#port = port
    this.address = `127.0.0.1:${port}`
    this.#upstream = upstream
  }

  static async start(upstream: string): Promise<Outage> {
    const [host = '127.0.0.1', port = '2181'] = upstream.split(',')[0]!.split(':')
    const outage = new Outage(await freePort(), { host, port: Number(port) })
    await outage.restore()
    return outage
  }

  async restore(): Promise<void> {
    const server = createServer((downstream) => {
      const upstream = tcp(this.#upstream)
      for (const socket of [downstream, upstream]) {
        this.#sockets.add(socket)
        socket.on('close', () => this.#sockets.delete(socket))
        socket.on('error', () => {
          downstream.destroy()
          upstream.destroy()
        })
      }
      downstream.pipe(upstream).pipe(downstream)
    })
    await new Promise<void>((resolve) => server.listen(this.#port, '127.0.0.1', resolve))
    this.#server = server
  }

  async cut(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    for (const socket of this.#sockets) socket.destroy()
    if (server) await new Promise((resolve) => server.close(resolve))
  }
}

describe.skipIf(!store)('zookeeper', () => {
  const { client, reader } = store!
  const zk = direct(reader)
  const root = `/shedlock-test-${process.pid}-${randomUUID().slice(0, 8)}`
  const pathOf = (name: string, base = root): string => `${base}/${zookeeperNodeName(name)}`
  const defaultPathNodes: string[] = []
  const provider = (options: { path?: string; timeout?: Duration } = {}) =>
    zookeeperLockProvider({ client, path: root, ...options })
  const lockUntilOf = async (name: string, base = root): Promise<number | undefined> => {
    const node = await zk.getData(pathOf(name, base))
    return node ? Date.parse(node.data) : undefined
  }
  const removeTree = async (path: string): Promise<void> => {
    for (const child of await zk.children(path).catch(() => [] as string[])) await removeTree(`${path}/${child}`)
    await zk.remove(path).catch(() => {})
  }

  // The default path is shared: remove it at the end only if this run created it.
  let hadDefaultPath = true
  beforeAll(async () => {
    hadDefaultPath = (await zk.getData('/shedlock')) !== undefined
  })

  afterAll(async () => {
    await removeTree(root)
    for (const node of defaultPathNodes) await zk.remove(node).catch(() => {})
    if (!hadDefaultPath && (await zk.children('/shedlock').catch(() => ['?'])).length === 0)
      await zk.remove('/shedlock').catch(() => {})
    for (const c of clients) c.close()
  })

  describe('conformance', () => {
    registerSuite(
      lockProviderSuite({
        provider: () => provider(),
        // Read the node with the test's own client and compare its ISO time with now.
        isLocked: async (name) => {
          const node = await zk.getData(pathOf(name))
          return node !== undefined && Date.parse(node.data) > Date.now()
        },
        deleteRecord: async (name) => {
          await zk.remove(pathOf(name))
        },
        unreachableProvider: () => {
          const dead = zookeeper.createClient('127.0.0.1:1', { spinDelay: 200 })
          clients.push(dead)
          dead.connect()
          return zookeeperLockProvider({ client: dead, path: root, timeout: '2s' })
        },
        extensible: true,
        slots: { inspector: true },
        fencing: true,
        // The node's path, <path>/<name>, holds at most 500,000 bytes.
        maxNameLength: 500_000 - Buffer.byteLength(`${root}/`),
      }),
    )
  })

  describe('storage format', () => {
    it("writes Java ShedLock's node: <path>/<name> holding lockUntil as ISO-8601 with 3 fraction digits", async () => {
      const name = `format-${randomUUID()}`
      const configuration = lockConfiguration({ name, lockAtMostFor: '1h', lockAtLeastFor: '10m' })
      const lock = await provider().lock(configuration)
      assert.ok(lock)
      const held = await zk.getData(`${root}/${name}`)
      expect(held?.data).toBe(configuration.lockAtMostUntil.toISOString())
      expect(held?.data).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      await lock.unlock()
      // Unlocked within lockAtLeastFor: lockUntil = lockAtLeastUntil.
      expect((await zk.getData(`${root}/${name}`))?.data).toBe(configuration.lockAtLeastUntil.toISOString())
    })

    it('writes max(now, lockAtLeastUntil) on unlock', async () => {
      const name = `unlock-${randomUUID()}`
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1h' }))
      assert.ok(lock)
      const before = Date.now()
      await lock.unlock()
      const until = (await lockUntilOf(name))!
      expect(until).toBeGreaterThanOrEqual(before - 5)
      expect(until).toBeLessThanOrEqual(Date.now())
    })

    it('respects a node Java ShedLock holds and takes over one whose lockUntil passed', async () => {
      const held = `java-held-${randomUUID()}`
      const expired = `java-expired-${randomUUID()}`
      await zk.mkdirp(root)
      const javaUntil = new Date(Date.now() + 3_600_000).toISOString()
      await zk.create(`${root}/${held}`, javaUntil)
      // Instant.toString() omits a zero fraction; Java's parser reads both forms.
      await zk.create(`${root}/${expired}`, '2020-01-01T00:00:00Z')
      const ours = provider()
      expect(await ours.lock(lockConfiguration({ name: held, lockAtMostFor: '1m' }))).toBeUndefined()
      expect((await zk.getData(`${root}/${held}`))?.data).toBe(javaUntil)
      const configuration = lockConfiguration({ name: expired, lockAtMostFor: '1m' })
      const lock = await ours.lock(configuration)
      assert.ok(lock)
      expect((await zk.getData(`${root}/${expired}`))?.data).toBe(configuration.lockAtMostUntil.toISOString())
      await lock.unlock()
    })

    it("reads Java's lockUntil with any fraction and an offset", async () => {
      const future = new Date(Date.now() + 3_600_000)
      const forms = [
        future.toISOString().replace('Z', '123456Z'),
        future.toISOString().replace(/\.\d{3}Z$/, 'Z'),
        future.toISOString().replace('Z', '+00:00'),
      ]
      for (const data of forms) {
        const name = `java-form-${randomUUID()}`
        await zk.mkdirp(root)
        await zk.create(`${root}/${name}`, data)
        expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' })), data).toBeUndefined()
      }
    })

    it('never overwrites a node left by an old ShedLock version: empty (ephemeral) or unreadable data counts as held', async () => {
      await zk.mkdirp(root)
      const ephemeral = `legacy-${randomUUID()}`
      await zk.create(`${root}/${ephemeral}`, undefined, zookeeper.CreateMode.EPHEMERAL)
      const garbage = `garbage-${randomUUID()}`
      await zk.create(`${root}/${garbage}`, 'locked by someone')
      for (const name of [ephemeral, garbage]) {
        expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' })), name).toBeUndefined()
      }
      expect((await zk.getData(`${root}/${ephemeral}`))?.data).toBe('')
      expect((await zk.getData(`${root}/${garbage}`))?.data).toBe('locked by someone')
      await zk.remove(`${root}/${ephemeral}`)
    })

    it('uses /shedlock by default and creates a custom path with its parents', async () => {
      const name = `default-path-${randomUUID()}`
      defaultPathNodes.push(`/shedlock/${name}`)
      const lock = await zookeeperLockProvider({ client }).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      expect(await zk.getData(`/shedlock/${name}`)).toBeDefined()
      await lock.unlock()

      const nested = `${root}/apps/billing/locks`
      const other = await zookeeperLockProvider({ client, path: nested }).lock(
        lockConfiguration({ name: 'invoice', lockAtMostFor: '1m' }),
      )
      assert.ok(other)
      expect(Date.parse((await zk.getData(`${nested}/invoice`))!.data)).toBeGreaterThan(Date.now())
      // The same name under another path is another lock.
      const elsewhere = await provider().lock(lockConfiguration({ name: 'invoice', lockAtMostFor: '1m' }))
      assert.ok(elsewhere)
      await other.unlock()
      await elsewhere.unlock()
    })
  })

  describe('names', () => {
    it('keeps names ZooKeeper accepts and escapes the others one-to-one', () => {
      expect(zookeeperNodeName('report:daily job é 日本')).toBe('report:daily job é 日本')
      expect(zookeeperNodeName('...')).toBe('...')
      expect(zookeeperNodeName('a/b')).toBe('a%2Fb')
      // '%' is held as it is, as Java writes it; only a name that needs escaping escapes its '%'.
      expect(zookeeperNodeName('100%')).toBe('100%')
      expect(zookeeperNodeName('a%252Fb')).toBe('a%252Fb')
      expect(zookeeperNodeName('100%/day')).toBe('100%25%2Fday')
      expect(zookeeperNodeName('.')).toBe('%2E')
      expect(zookeeperNodeName('..')).toBe('%2E%2E')
      expect(zookeeperNodeName('tab\there')).toBe('tab%09here')
      expect(zookeeperNodeName('smile😀')).toBe('smile%F0%9F%98%80')
      expect(zookeeperNodeName('private\ue000')).toBe('private%EE%80%80')
      expect(zookeeperNodeName('lone\ud800')).toBe('lone%uD800')
      const names = [
        'a/b',
        'a%252Fb',
        '.',
        '%252E',
        '..',
        'x\ud800',
        'x%uD8',
        'x\u0001',
        'x%1',
        '100%',
        '100%25',
        '100%/',
        'a%2fb',
      ]
      expect(new Set(names.map(zookeeperNodeName)).size).toBe(names.length)
    })

    it("refuses, before sending, a name that is exactly another name's escaped node", async () => {
      // "a%2Fb" is the node of "a/b", which ZooKeeper would nest; "%2E" is the node of ".".
      for (const name of ['a%2Fb', '%2E', '%2E%2E', 'x%uD800', 'x%01', '100%25%2Fday']) {
        expect(() => zookeeperNodeName(name), name).toThrow(LockConfigurationError)
        const error = await provider()
          .lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
          .catch((e: unknown) => e)
        expect(error, name).toBeInstanceOf(LockConfigurationError)
        expect((error as Error).message).toContain(JSON.stringify(name))
        expect(await zk.getData(`${root}/${name}`), name).toBeUndefined()
      }
    })

    it('locks names with separators, relative segments, control and astral characters, each in its own node', async () => {
      const id = randomUUID().slice(0, 8)
      const names = [
        `a/${id}`,
        `a%252F${id}`,
        '.',
        '..',
        `tab\t${id}`,
        `emoji😀${id}`,
        `private\ue000${id}`,
        `plain:${id} é`,
        `100%-${id}`,
      ]
      const locks = []
      for (const name of names) {
        const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
        assert.ok(lock, name)
        locks.push(lock)
      }
      for (const name of names) expect(await lockUntilOf(name), name).toBeGreaterThan(Date.now())
      // Java's node for a name ZooKeeper accepts is the name itself.
      expect(await zk.getData(`${root}/plain:${id} é`)).toBeDefined()
      expect(await zk.getData(`${root}/100%-${id}`)).toBeDefined()
      for (const lock of locks) await lock.unlock()
    })

    it("uses Java's node for a name with '%': a Java lock on \"100%\" is honoured, and ours is written there", async () => {
      await zk.mkdirp(root)
      const javaUntil = new Date(Date.now() + 3_600_000).toISOString()
      await zk.create(`${root}/100%`, javaUntil)
      expect(zookeeperNodeName('100%')).toBe('100%')
      expect(await provider().lock(lockConfiguration({ name: '100%', lockAtMostFor: '1m' }))).toBeUndefined()
      expect((await zk.getData(`${root}/100%`))?.data).toBe(javaUntil)

      const configuration = lockConfiguration({ name: '50%', lockAtMostFor: '1h' })
      const lock = await provider().lock(configuration)
      assert.ok(lock)
      expect((await zk.getData(`${root}/50%`))?.data).toBe(configuration.lockAtMostUntil.toISOString())
      expect(await zk.getData(`${root}/50%25`)).toBeUndefined()
      await lock.unlock()
    })
  })

  describe('name length', () => {
    it('a name too long for one request fails fast with LockConfigurationError, and locks on the same client are not disturbed', async () => {
      // Its own client, so that a dropped connection would not disturb the other tests.
      const own = await connect(url)
      try {
        const locks = zookeeperLockProvider({ client: own, path: root })
        // Over jute.maxbuffer (1 MB by default): ZooKeeper closes the connection on such a request.
        const tooLong = `long-${randomUUID()}-${'x'.repeat(1_100_000)}`
        const other = `other-${randomUUID()}`
        const started = Date.now()
        const [refused, concurrent] = await Promise.allSettled([
          locks.lock(lockConfiguration({ name: tooLong, lockAtMostFor: '1m' })),
          locks.lock(lockConfiguration({ name: other, lockAtMostFor: '1m' })),
        ])
        expect(Date.now() - started).toBeLessThan(1_000)
        assert.equal(refused.status, 'rejected')
        expect(refused.reason).toBeInstanceOf(LockConfigurationError)
        expect((refused.reason as Error).message).toContain(tooLong.slice(0, 60))
        assert.equal(concurrent.status, 'fulfilled')
        assert.ok(concurrent.value, 'a lock on another name, sent alongside, failed')
        await concurrent.value.unlock()
        const next = await locks.lock(lockConfiguration({ name: `next-${randomUUID()}`, lockAtMostFor: '1m' }))
        assert.ok(next, 'a lock on another name right after failed')
        await next.unlock()
      } finally {
        own.close()
      }
    })
  })

  describe('owner check', () => {
    it("after another writer's change, neither unlock nor extend writes", async () => {
      const name = `owner-${randomUUID()}`
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      // A Java node (which writes without a version check) or an operator changes the node.
      const theirs = new Date(Date.now() + 600_000).toISOString()
      await zk.setData(pathOf(name), theirs)
      expect(await lock.extend('5m', 0)).toBeUndefined()
      expect((await zk.getData(pathOf(name)))?.data).toBe(theirs)

      const second = await provider().lock(lockConfiguration({ name: `${name}-2`, lockAtMostFor: '1m' }))
      assert.ok(second)
      await zk.setData(pathOf(`${name}-2`), theirs)
      await second.unlock()
      expect((await zk.getData(pathOf(`${name}-2`)))?.data).toBe(theirs)
    })

    it('follows its own version through extensions', async () => {
      const name = `versions-${randomUUID()}`
      const first = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(first)
      let lock: ExtensibleLock = first
      for (let i = 0; i < 3; i++) {
        const next = await lock.extend('2m', 0)
        assert.ok(next)
        lock = next
      }
      // Created at version 1 (a multi of create and setData), then one setData per extension.
      expect((await zk.getData(pathOf(name)))?.version).toBe(4)
      await lock.unlock()
      expect(await lockUntilOf(name)).toBeLessThanOrEqual(Date.now())
    })

    it('does not extend an expired lock nobody took over, and leaves its node alone', async () => {
      const name = `expired-${randomUUID()}`
      const lock = await provider().lock(lockConfiguration({ name, lockAtMostFor: 100 }))
      assert.ok(lock)
      const before = await zk.getData(pathOf(name))
      await sleep(200)
      expect(await lock.extend('1m', 0)).toBeUndefined()
      expect(await zk.getData(pathOf(name))).toEqual(before)
    })
  })

  describe('failures', () => {
    it('a closed client rejects at once with LockProviderError and a cause', async () => {
      const closed = await connect(url)
      closed.close()
      const name = `closed-${randomUUID()}`
      const started = Date.now()
      const error = await zookeeperLockProvider({ client: closed, path: root })
        .lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toContain(`zookeeper: could not acquire lock "${name}"`)
      expect((error as LockProviderError).cause).toBeDefined()
      expect((error as LockProviderError).provider).toBe('zookeeper')
      expect(Date.now() - started).toBeLessThan(5_000)
    })

    it('a client that cannot reach its server rejects within the timeout instead of waiting forever', async () => {
      const dead = zookeeper.createClient('127.0.0.1:1', { spinDelay: 200 })
      clients.push(dead)
      dead.connect()
      const started = Date.now()
      // The default timeout, 5 s, bounds the wait.
      const error = await zookeeperLockProvider({ client: dead })
        .lock(lockConfiguration({ name: 'dead', lockAtMostFor: '1m' }))
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockProviderError)
      expect((error as Error).message).toMatch(/no reply from ZooKeeper within 5000ms/)
      expect((error as LockProviderError).cause).toBeInstanceOf(Error)
      expect(Date.now() - started).toBeLessThan(15_000)
    })

    it('a request that reaches ZooKeeper after its timeout writes nothing', async () => {
      // Not connected yet: node-zookeeper-client queues the request until connect().
      const late = zookeeper.createClient(url)
      clients.push(late)
      const name = `late-${randomUUID()}`
      const locks = zookeeperLockProvider({ client: late, path: root, timeout: 300 })
      await expect(locks.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).rejects.toBeInstanceOf(
        LockProviderError,
      )
      await new Promise<void>((resolve) => {
        late.once('connected', () => resolve())
        late.connect()
      })
      await sleep(500)
      expect(await zk.getData(pathOf(name))).toBeUndefined()
      const lock = await locks.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(lock)
      await lock.unlock()
    })

    it('rejects while its server is unreachable and works again once it is back, with the same client', async () => {
      const outage = await Outage.start(url)
      try {
        const own = await connect(outage.address)
        const locks = zookeeperLockProvider({ client: own, path: root, timeout: '2s' })
        const before = await locks.lock(lockConfiguration({ name: 'before-outage', lockAtMostFor: '1m' }))
        assert.ok(before)
        await outage.cut()
        const name = 'during-outage'
        let ran = false
        await expect(
          createLockingTaskExecutor(locks).executeWithLock(
            () => {
              ran = true
            },
            { name, lockAtMostFor: '1m' },
          ),
        ).rejects.toThrow(new RegExp(`zookeeper: could not acquire lock "${name}"`))
        expect(ran).toBe(false)
        expect(await before.unlock().catch((e: unknown) => e)).toBeInstanceOf(LockProviderError)
        await outage.restore()
        let after: ExtensibleLock | undefined
        for (const deadline = Date.now() + 20_000; !after && Date.now() < deadline; ) {
          after = await locks
            .lock(lockConfiguration({ name: 'after-outage', lockAtMostFor: '1m' }))
            .catch(() => undefined)
          if (!after) await sleep(200)
        }
        assert.ok(after, 'the provider did not recover once the server was reachable again')
        await after.unlock()
        // The failed unlock left its handle usable: retried, it releases the lock.
        await before.unlock()
        expect(await lockUntilOf('before-outage')).toBeLessThanOrEqual(Date.now())
      } finally {
        await outage.cut()
      }
    }, 60_000)

    it('with a client function, a replaced client takes over, also for locks taken through the old one', async () => {
      let current = await connect(url)
      const locks = zookeeperLockProvider({ client: () => current, path: root })
      const name = `replaced-${randomUUID()}`
      const held = await locks.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(held)
      // The application's client died (say, its session expired) and was replaced.
      current.close()
      await expect(locks.lock(lockConfiguration({ name: `${name}-2`, lockAtMostFor: '1m' }))).rejects.toBeInstanceOf(
        LockProviderError,
      )
      current = await connect(url)
      await held.unlock()
      expect(await lockUntilOf(name)).toBeLessThanOrEqual(Date.now())
      const again = await locks.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
      assert.ok(again)
      await again.unlock()

      const broken = zookeeperLockProvider({ client: () => undefined as never, path: root })
      await expect(broken.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).rejects.toThrow(
        /client function returned no node-zookeeper-client Client/,
      )
    })
  })

  describe('bad options', () => {
    it('rejects a missing client, invalid paths and timeouts at construction', () => {
      const bad: unknown[] = [
        undefined,
        {},
        { client: {} },
        { client: 42 },
        { client, path: '' },
        { client, path: 'shedlock' },
        { client, path: '/' },
        { client, path: '/shedlock/' },
        { client, path: '//shedlock' },
        { client, path: '/a/../b' },
        { client, path: '/a/./b' },
        { client, path: '/zookeeper' },
        { client, path: '/zookeeper/locks' },
        { client, path: '/a\u0001b' },
        { client, path: 42 },
        { client, timeout: 0 },
        { client, timeout: 'soon' },
      ]
      for (const options of bad)
        expect(() => zookeeperLockProvider(options as never), JSON.stringify(options) ?? 'undefined').toThrow(
          LockConfigurationError,
        )
      expect(() => zookeeperLockProvider({ client, path: '/apps/billing/shedlock', timeout: '2s' })).not.toThrow()
    })
  })
})
