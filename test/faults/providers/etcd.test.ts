import { etcdLockProvider } from 'shedlock/etcd'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { storeFaults } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD, SECRET_USER } from '../support/servers.ts'
import { startOrSkip } from '../support/start.ts'
import { etcdUnderTest } from '../support/stores.ts'

const etcd = await startOrSkip('etcd', () => etcdUnderTest())

describe.skipIf(!etcd)('etcd', () => {
  const sut = () => etcd!
  storeFaults(sut)
  // The client authenticates with a password: against a server without auth, and a closed port.
  secrets('etcd', SECRET_PASSWORD, async () => ({
    cases: [
      {
        what: 'credentials for a server without auth',
        spec: etcd!.spec({ user: SECRET_USER, password: SECRET_PASSWORD }),
      },
      {
        what: 'closed port',
        spec: etcd!.spec({ user: SECRET_USER, password: SECRET_PASSWORD, port: await freePort() }),
      },
    ],
  }))
})

describe('etcd options', () => {
  hostileOptions('etcd', [
    {
      option: 'environment',
      build: (environment, client) => etcdLockProvider({ client, environment }),
      safe: (v) => v !== '' && !v.includes(':'),
    },
  ])
})
