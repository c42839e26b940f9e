import { memcachedLockProvider } from 'shedlock/memcached'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { storeFaults } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD, SECRET_USER } from '../support/servers.ts'
import { startOrSkip } from '../support/start.ts'
import { memcachedUnderTest } from '../support/stores.ts'

const memcached = await startOrSkip('memcached', () => memcachedUnderTest())

describe.skipIf(!memcached)('memcached (not extensible: no keep-alive)', () => {
  const sut = () => memcached!
  storeFaults(sut, { extensible: false })
  // memjs takes SASL credentials in the server string (user:password@host:port).
  secrets('memcached', SECRET_PASSWORD, async () => ({
    cases: [
      // memcached without SASL ignores the credentials: this lock works, and its log lines count.
      {
        what: 'SASL credentials for a server without SASL',
        spec: memcached!.spec({ user: SECRET_USER, password: SECRET_PASSWORD }),
        fails: false,
      },
      {
        what: 'closed port',
        spec: memcached!.spec({ user: SECRET_USER, password: SECRET_PASSWORD, port: await freePort() }),
      },
    ],
  }))
})

describe('memcached options', () => {
  hostileOptions('memcached', [
    {
      option: 'environment',
      build: (environment, client) => memcachedLockProvider({ client, environment }),
      safe: (v) => v !== '' && !/[\x00-\x20\x7f:]/.test(v),
    },
  ])
})
