import { randomBytes } from 'node:crypto'
import { afterAll, describe } from 'vitest'
import { etcdLockProvider } from '../../../src/providers/etcd/index.ts'
import { ETCD_URL, etcdOrSkip } from '../../helpers/kv-clients.ts'
import { cliBasics } from '../../cli/support/proof.ts'

const url = ETCD_URL
const etcd = await etcdOrSkip()

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
