import { zookeeperLockProvider } from 'shedlock/zookeeper'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { storeFaults } from '../support/fault-groups.ts'
import { startOrSkip } from '../support/start.ts'
import { zookeeperUnderTest } from '../support/stores.ts'

// No secrets group: node-zookeeper-client takes no password in its connection string (digest
// credentials go through addAuthInfo, which the provider never sees).
const zookeeper = await startOrSkip('zookeeper', () => zookeeperUnderTest())

describe.skipIf(!zookeeper)('zookeeper', () => {
  const sut = () => zookeeper!
  storeFaults(sut)
})

const segment = (s: string): boolean => s !== '' && s !== '.' && s !== '..' && !/[\x00-\x1f\x7f]/.test(s)

describe('zookeeper options', () => {
  hostileOptions('zookeeper', [
    {
      option: 'path',
      build: (path, client) => zookeeperLockProvider({ client, path }),
      safe: (v) => v.startsWith('/') && v.slice(1).split('/').every(segment) && !v.startsWith('/zookeeper'),
    },
  ])
})
