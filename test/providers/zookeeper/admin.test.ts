import { randomBytes } from 'node:crypto'
import zookeeper from 'node-zookeeper-client'
import { afterAll, describe } from 'vitest'
import { zookeeperLockProvider, zookeeperNodeName } from '../../../src/providers/zookeeper/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { cliBasics } from '../../cli/support/proof.ts'

const where = process.env.SHEDLOCK_ZOOKEEPER_URL ?? '127.0.0.1:2181'
const client = await connectOrSkip('zookeeper', `${where} (SHEDLOCK_ZOOKEEPER_URL)`, async () => {
  const c = zookeeper.createClient(where, { sessionTimeout: 30_000, spinDelay: 200 })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      c.close()
      reject(new Error('no connection within 10s'))
    }, 10_000)
    c.once('connected', () => {
      clearTimeout(timer)
      resolve()
    })
    c.connect()
  })
  return c
})

describe.skipIf(!client)('shedlock CLI on ZooKeeper (the built bin)', () => {
  const zk = client!
  const root = `/shedlock-cli-${process.pid}-${randomBytes(3).toString('hex')}`
  const cliUrl = `zookeeper://${where}?path=${root}`
  afterAll(async () => {
    // node-zookeeper-client has removeRecursive; its type declarations leave it out.
    const remover = zk as unknown as {
      removeRecursive(path: string, version: number, callback: (error: unknown) => void): void
    }
    for (const path of [root, `${root}-init`])
      await new Promise<void>((resolve) => remover.removeRecursive(path, -1, () => resolve()))
    zk.close()
  })

  cliBasics({
    kind: /^ZooKeeper /,
    args: ['--url', cliUrl],
    provider: () => zookeeperLockProvider({ client: zk, path: root }),
    isHeld: (name) =>
      new Promise((resolve, reject) =>
        zk.getData(`${root}/${zookeeperNodeName(name)}`, (error, data) => {
          if ((error as { code?: number } | null)?.code === zookeeper.Exception.NO_NODE) resolve(false)
          else if (error) reject(error)
          else resolve(Date.parse(data.toString('utf8')) > Date.now())
        }),
      ),
    init: {
      args: ['--url', `zookeeper://${where}?path=${root}-init`],
      first: new RegExp(`created node ${root}-init`),
      again: new RegExp(`node ${root}-init already exists`),
    },
  })
})
