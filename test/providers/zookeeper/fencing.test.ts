// ZooKeeper's fencing tokens (the zxid of the write that takes the lock) from several processes
// over dist/, and the paused-holder scenario. Build dist/ first (`npm run build`; `npm test` does).
import { randomUUID } from 'node:crypto'
import zookeeper from 'node-zookeeper-client'
import { afterAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { zookeeperLockProvider } from '../../../src/providers/zookeeper/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { fencingRace } from '../../helpers/fencing-race.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'
import { killStartedProcesses } from '../../helpers/processes.ts'

const url = process.env.SHEDLOCK_ZOOKEEPER_URL ?? '127.0.0.1:2181'

const client = await connectOrSkip('zookeeper', `${url} (SHEDLOCK_ZOOKEEPER_URL)`, async () => {
  const c = zookeeper.createClient(url, { sessionTimeout: 30_000, spinDelay: 200 })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      c.close()
      reject(new Error('no connection within 10000ms'))
    }, 10_000)
    c.once('connected', () => {
      clearTimeout(timer)
      resolve()
    })
    c.connect()
  })
  return c
})

/** The Stat of `path`, read with the test's own client. */
const statOf = (path: string) =>
  new Promise<zookeeper.Stat>((resolve, reject) =>
    client!.exists(path, (error, stat) => (error ? reject(error) : resolve(stat))),
  )

describe.skipIf(!client)('zookeeper fencing tokens', () => {
  const root = `/shedlock-fencing-${process.pid}-${randomUUID().slice(0, 8)}`
  const nodeProvider = `
import zookeeper from 'node-zookeeper-client'
import { zookeeperLockProvider } from 'shedlock/zookeeper'
const client = zookeeper.createClient(${JSON.stringify(url)})
await new Promise((resolve) => { client.once('connected', resolve); client.connect() })
export const provider = zookeeperLockProvider({ client, path: ${JSON.stringify(root)} })
export const close = async () => client.close()
`
  afterAll(async () => {
    killStartedProcesses()
    // node-zookeeper-client has removeRecursive; its type declarations do not.
    const remover = client as unknown as { removeRecursive(path: string, version: number, done: () => void): void }
    await new Promise<void>((resolve) => remover.removeRecursive(root, -1, resolve))
    client!.close()
  })

  it('the token is the zxid of the write that took the lock: the create, then each takeover', async () => {
    const provider = zookeeperLockProvider({ client: client!, path: root })
    const name = `zxid-${randomUUID()}`
    const first = await provider.lock(lockConfiguration({ name, lockAtMostFor: 200, lockAtLeastFor: 0 }))
    const created = await statOf(`${root}/${name}`)
    expect(first?.fencingToken).toBe(created.czxid.readBigInt64BE(0))
    expect(first?.fencingToken).toBe(created.mzxid.readBigInt64BE(0))
    // Created and set in one multi: one zxid, version 1.
    expect(created.version).toBe(1)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const second = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: 0 }))
    const taken = await statOf(`${root}/${name}`)
    expect(second?.fencingToken).toBe(taken.mzxid.readBigInt64BE(0))
    expect(second!.fencingToken!).toBeGreaterThan(first!.fencingToken!)
    await second!.unlock()
  })

  it('1,000 acquisitions from 4 processes, with expiries and takeovers: tokens strictly increase', async () => {
    const outcome = await fencingRace({ nodeProvider })
    expect(outcome.acquisitions).toHaveLength(1000)
    expect(outcome.violations).toEqual([])
    expect(outcome.takeovers).toBeGreaterThan(0)
  }, 240_000)

  it('a paused holder cannot write with its token after the lock was taken over', async () => {
    const outcome = await pausedHolder({
      holderProvider: nodeProvider,
      taker: zookeeperLockProvider({ client: client!, path: root }),
    })
    expect(outcome.takerToken).toBeGreaterThan(outcome.holderToken)
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
