// NATS KV's fencing tokens (the revision of the write that takes the lock) from several processes
// over dist/, and the paused-holder scenario. Build dist/ first (`npm run build`; `npm test` does).
import { randomUUID } from 'node:crypto'
import { jetstreamManager } from '@nats-io/jetstream'
import { type KV, Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { natsLockKey, natsLockProvider } from '../../../src/providers/nats/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { fencingRace } from '../../helpers/fencing-race.ts'
import { pausedHolder } from '../../helpers/paused-holder.ts'
import { killStartedProcesses } from '../../helpers/processes.ts'

const url = process.env.SHEDLOCK_NATS_URL ?? 'nats://127.0.0.1:4222'
const bucket = `shedlock-fencing-${process.pid}-${Math.floor(Math.random() * 1e9).toString(36)}`

const nc = await connectOrSkip('nats', `${url} (SHEDLOCK_NATS_URL)`, async () => {
  const connection = await connect({ servers: url, timeout: 3000 })
  try {
    await jetstreamManager(connection)
    return connection
  } catch (error) {
    await connection.close()
    throw error
  }
})

describe.skipIf(!nc)('nats fencing tokens', () => {
  let kv: KV
  const nodeProvider = `
import { connect } from '@nats-io/transport-node'
import { Kvm } from '@nats-io/kv'
import { natsLockProvider } from 'shedlock/nats'
const nc = await connect({ servers: ${JSON.stringify(url)} })
export const provider = natsLockProvider({ kv: await new Kvm(nc).open(${JSON.stringify(bucket)}) })
export const close = () => nc.close()
`
  beforeAll(async () => {
    kv = await new Kvm(nc!).create(bucket)
  })
  afterAll(async () => {
    killStartedProcesses()
    await kv?.destroy()
    await nc!.close()
  })

  it('the token is the revision of the write that took the lock', async () => {
    const provider = natsLockProvider({ kv })
    const name = `revision-${randomUUID()}`
    const first = await provider.lock(lockConfiguration({ name, lockAtMostFor: 100, lockAtLeastFor: 0 }))
    expect(first?.fencingToken).toBe(BigInt((await kv.get(natsLockKey(name)))!.revision))
    await new Promise((resolve) => setTimeout(resolve, 200))
    const second = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: 0 }))
    expect(second?.fencingToken).toBe(BigInt((await kv.get(natsLockKey(name)))!.revision))
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
    const outcome = await pausedHolder({ holderProvider: nodeProvider, taker: natsLockProvider({ kv }) })
    expect(outcome.takerToken).toBeGreaterThan(outcome.holderToken)
    expect(outcome.takerWriteAccepted).toBe(true)
    expect(outcome.staleWriteAccepted).toBe(false)
    expect(outcome.finalValue).toBe('taker')
  }, 60_000)
})
