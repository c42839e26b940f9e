import { randomBytes } from 'node:crypto'
import { jetstreamManager } from '@nats-io/jetstream'
import { type KV, Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { natsLockName } from '../../../src/cli/stores/nats.ts'
import { natsLockKey, natsLockProvider } from '../../../src/providers/nats.ts'
import { connectOrSkip } from '../../support/backends.ts'
import { cli } from '../support/cli.ts'
import { cliBasics } from '../support/proof.ts'

const url = process.env.SHEDLOCK_NATS_URL ?? 'nats://127.0.0.1:4222'
const nats = await connectOrSkip('nats', `${url} (SHEDLOCK_NATS_URL)`, async () => {
  const nc = await connect({ servers: url, timeout: 3000 })
  try {
    await jetstreamManager(nc)
    return nc
  } catch (error) {
    await nc.close()
    throw error
  }
})

describe('natsLockName', () => {
  it('inverts the provider natsLockKey for every well-formed name', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1 }), (name) => {
        expect(natsLockName(natsLockKey(name))).toBe(name)
      }),
    )
    expect(natsLockName('=report=3Adaily')).toBe('report:daily')
  })
})

describe.skipIf(!nats)('shedlock CLI on NATS JetStream KV (the built bin)', () => {
  const nc = nats!
  const bucket = `shedlock-cli-${process.pid}-${randomBytes(3).toString('hex')}`
  const cliUrl = `${url}?bucket=${bucket}`
  // Opened after the proof's `shedlock init` created the bucket.
  let kv: KV
  beforeAll(async () => {
    kv = await new Kvm(nc).open(bucket)
  })
  afterAll(async () => {
    const jsm = await jetstreamManager(nc)
    for (const name of [bucket, `${bucket}-init`]) await jsm.streams.delete(`KV_${name}`).catch(() => {})
    await nc.close()
  })

  cliBasics({
    kind: /^NATS /,
    args: ['--url', cliUrl],
    provider: () => natsLockProvider({ kv }),
    isHeld: async (name) => {
      const entry = await kv.get(natsLockKey(name))
      return entry?.operation === 'PUT' && Number(Buffer.from(entry.value).readBigInt64BE(0)) > Date.now()
    },
    init: { args: ['--url', `${url}?bucket=${bucket}-init`], first: new RegExp(`created bucket ${bucket}-init`), again: new RegExp(`bucket ${bucket}-init already exists`) },
  })

  it('doctor fails on a missing bucket, naming shedlock init', async () => {
    const run = await cli(['doctor', '--url', `${url}?bucket=${bucket}-missing`])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(/FAIL {2}bucket .*-missing: does not exist; create it with: shedlock init --url /)
  })
})
