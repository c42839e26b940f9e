import { redisLockProvider } from 'shedlock/redis'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { storeFaults, storeRestart } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD, startRedis } from '../support/servers.ts'
import { startOrSkip } from '../support/start.ts'
import { redisUnderTest } from '../support/stores.ts'

const redis = await startOrSkip('redis', () => redisUnderTest())
// The same restart on a Redis that persists every write (appendfsync always): the lock survives.
const persistent = await startOrSkip('redis', () => redisUnderTest({ persistent: true }))

describe.skipIf(!redis)('redis (no persistence, the default)', () => {
  const sut = () => redis!
  storeFaults(sut)
  secrets('redis', SECRET_PASSWORD, async () => {
    const guarded = await startRedis({ password: SECRET_PASSWORD })
    return {
      cases: [
        {
          what: 'wrong password (WRONGPASS)',
          spec: { ...redis!.spec(), port: guarded.port, password: `${SECRET_PASSWORD}-wrong` },
        },
        { what: 'closed port', spec: { ...redis!.spec(), port: await freePort(), password: SECRET_PASSWORD } },
      ],
      close: () => guarded.destroy(),
    }
  })
})

describe.skipIf(!persistent)('redis (appendfsync always)', () => {
  storeRestart(() => persistent!)
})

describe('redis options', () => {
  hostileOptions('redis', [
    {
      option: 'keyPrefix',
      build: (keyPrefix, client) => redisLockProvider({ client, keyPrefix }),
      safe: (v) => v !== '' && !v.includes(':'),
    },
    {
      option: 'environment',
      build: (environment, client) => redisLockProvider({ client, environment }),
      safe: (v) => v !== '' && !v.includes(':'),
    },
  ])
})
