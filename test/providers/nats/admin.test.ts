import { randomBytes } from 'node:crypto'
import { jetstreamManager } from '@nats-io/jetstream'
import { type KV, Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { natsLockKey, natsLockProvider } from '../../../src/providers/nats/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { cli, lines } from '../../cli/support/cli.ts'
import { cliBasics } from '../../cli/support/proof.ts'

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
    init: {
      args: ['--url', `${url}?bucket=${bucket}-init`],
      first: new RegExp(`created bucket ${bucket}-init`),
      again: new RegExp(`bucket ${bucket}-init already exists`),
    },
  })

  it('list and unlock on a missing bucket say, in one line, to run shedlock init', async () => {
    for (const command of [['list'], ['unlock', '--name', 'x', '--yes']]) {
      const run = await cli([...command, '--url', `${url}?bucket=${bucket}-absent`])
      expect(run.code, run.stderr).toBe(1)
      expect(lines(run.stderr)).toHaveLength(1)
      expect(run.stderr).toMatch(
        /: bucket \S+-absent does not exist; create it with: shedlock init --url nats:\S+-absent$/m,
      )
    }
  })

  it('doctor fails on a missing bucket, naming shedlock init', async () => {
    const run = await cli(['doctor', '--url', `${url}?bucket=${bucket}-missing`])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(/FAIL {2}bucket .*-missing: does not exist; create it with: shedlock init --url /)
  })
})
