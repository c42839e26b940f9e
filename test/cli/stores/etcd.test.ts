import { randomBytes } from 'node:crypto'
import { Etcd3 } from 'etcd3'
import { afterAll, describe } from 'vitest'
import { etcdLockProvider } from '../../../src/providers/etcd.ts'
import { connectOrSkip } from '../../support/backends.ts'
import { cliBasics } from '../support/proof.ts'

const url = process.env.SHEDLOCK_ETCD_URL ?? 'http://127.0.0.1:2379'
const etcd = await connectOrSkip('etcd', `${url} (SHEDLOCK_ETCD_URL)`, async () => {
  const client = new Etcd3({ hosts: url })
  try {
    await client.get('shedlock-connection-probe').string()
  } catch (error) {
    client.close()
    throw error
  }
  return client
})

describe.skipIf(!etcd)('shedlock CLI on etcd (the built bin)', () => {
  const client = etcd!
  const environment = `cli-test-${process.pid}-${randomBytes(3).toString('hex')}`
  const cliUrl = `${url.replace(/^https?:/, 'etcd:')}?environment=${environment}`
  afterAll(async () => {
    await client.delete().prefix(`shedlock:${environment}:`)
    client.close()
  })

  cliBasics({
    kind: /^etcd /,
    args: ['--url', cliUrl],
    provider: () => etcdLockProvider({ client, environment }),
    isHeld: async (name) => (await client.get(`shedlock:${environment}:${name}`).string()) !== null,
    init: { args: ['--url', cliUrl], first: /etcd needs no setup/, again: /etcd needs no setup/ },
  })
})
