import { natsLockProvider } from 'shedlock/nats'
import { describe, expect, it } from 'vitest'
import { storeFaults } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD, SECRET_USER, startNats } from '../support/servers.ts'
import { startOrSkip } from '../support/start.ts'
import { natsUnderTest } from '../support/stores.ts'

const nats = await startOrSkip('nats', () => natsUnderTest())

describe.skipIf(!nats)('nats (JetStream KV, file store)', () => {
  const sut = () => nats!
  storeFaults(sut)
  secrets('nats', SECRET_PASSWORD, async () => {
    const guarded = await startNats({ user: SECRET_USER, password: SECRET_PASSWORD })
    return {
      cases: [
        {
          what: 'wrong password',
          spec: nats!.spec({ port: guarded.port, user: SECRET_USER, password: `${SECRET_PASSWORD}-wrong` }),
        },
        {
          what: 'closed port',
          spec: nats!.spec({ port: await freePort(), user: SECRET_USER, password: SECRET_PASSWORD }),
        },
      ],
      close: () => guarded.destroy(),
    }
  })
})

describe('nats options', () => {
  // The bucket is the application's own object: there is no name option to abuse.
  it('bad input: a kv that is not a bucket is rejected before any call', () => {
    expect(() => natsLockProvider({ kv: {} as never })).toThrow(/kv/)
  })
})
