// etcd's fencing tokens (the revision of the acquiring transaction) from several processes over
// dist/, and the paused-holder scenario. Build dist/ first (`npm run build`; `npm test` does).
import { randomUUID } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { etcdLockProvider } from '../../../src/providers/etcd/index.ts'
import { fencingRace } from '../../helpers/fencing-race.ts'
import { ETCD_URL, etcdOrSkip } from '../../helpers/kv-clients.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'
import { killStartedProcesses } from '../../helpers/processes.ts'

const etcd = await etcdOrSkip()

describe.skipIf(!etcd)('etcd fencing tokens', () => {
  const client = etcd!
  const environment = `fencing-${process.pid}-${randomUUID().slice(0, 8)}`
  const nodeProvider = `
import { Etcd3 } from 'etcd3'
import { etcdLockProvider } from 'shedlock/etcd'
const client = new Etcd3({ hosts: ${JSON.stringify(ETCD_URL)} })
export const provider = etcdLockProvider({ client, environment: ${JSON.stringify(environment)} })
export const close = async () => client.close()
`
  afterAll(async () => {
    killStartedProcesses()
    const { kvs } = await client.getAll().prefix(`shedlock:${environment}:`).exec()
    for (const kv of kvs) if (kv.lease !== '0') await client.leaseClient.leaseRevoke({ ID: kv.lease }).catch(() => {})
    await client.delete().prefix(`shedlock:${environment}:`)
    client.close()
  })

  it('the token is the revision of the transaction that took the lock', async () => {
    const provider = etcdLockProvider({ client, environment })
    const name = `revision-${randomUUID()}`
    const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: 0 }))
    const { kvs } = await client.get(`shedlock:${environment}:${name}`).exec()
    expect(lock?.fencingToken).toBe(BigInt(kvs[0]!.mod_revision))
    expect(kvs[0]!.create_revision).toBe(kvs[0]!.mod_revision)
    await lock!.unlock()
  })

  it('1,000 acquisitions from 4 processes, with expiries and takeovers: tokens strictly increase', async () => {
    // etcd holds a lease at least 2 s, so abandoned locks are fewer than on the other stores.
    const outcome = await fencingRace({ nodeProvider, lockAtMostForMs: 1_000, abandonRate: 0.01, names: 6 })
    expect(outcome.acquisitions).toHaveLength(1000)
    expect(outcome.violations).toEqual([])
    expect(outcome.takeovers).toBeGreaterThan(0)
  }, 240_000)

  it('a paused holder cannot write with its token after the lock was taken over', async () => {
    const outcome = await pausedHolder({
      holderProvider: nodeProvider,
      taker: etcdLockProvider({ client, environment }),
      // Whole seconds of at least 2 s: etcd's shortest lease.
      lockAtMostForMs: 2_000,
    })
    expect(outcome.takerToken).toBeGreaterThan(outcome.holderToken)
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
