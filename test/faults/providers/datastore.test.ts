import { datastoreLockProvider } from 'shedlock/datastore'
import { afterAll, describe } from 'vitest'
import { GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'
import { emulatorOrSkip } from '../../providers/datastore/emulator.ts'
import { badLockNames, hostileOptions } from '../support/bad-input.ts'
import { clockSkew, taskOutlivesLock } from '../support/fault-groups.ts'
import type { StoreUnderTest } from '../support/stores.ts'

// Datastore is Google's emulator, shared with the provider tests (scripts/services.sh starts it):
// it runs in memory and cannot be restarted or cut off without losing every store's state, so
// only the groups that run inside one process apply (clock skew, a task outliving its lock, bad
// input). Kills, restarts and network cuts would test the emulator, not Datastore.
const emulator = await emulatorOrSkip()

describe.skipIf(!emulator)('datastore (emulator)', () => {
  const { datastore, namespace } = emulator!
  const key = (name: string) => datastore.key({ namespace, path: ['lock', name] })
  const read = async (name: string) => (await datastore.get(key(name)))[0] as Record<string, unknown> | undefined
  const until = async (name: string) => {
    const value = (await read(name))?.lock_until
    return value instanceof Date ? value.getTime() : undefined
  }
  afterAll(async () => {
    const [entities] = await datastore.runQuery(datastore.createQuery(namespace, 'lock').select('__key__'))
    await datastore.delete(entities.map((entity) => entity[datastore.KEY]))
  })
  const sut: StoreUnderTest = {
    label: 'datastore (emulator)',
    // The fault groups used here read only the store's facts, not its name.
    store: 'mongodb',
    facts: { extensible: true, expiry: 'app', earlyMs: 0, lateMs: 0, minLockMs: 0, keepsLocksAcrossRestart: undefined },
    server: undefined,
    spec: () => {
      throw new Error('datastore has no worker spec')
    },
    node: async (options = {}) =>
      datastoreLockProvider(options.clock ? { datastore, clock: options.clock } : { datastore }),
    isHeld: async (name) => ((await until(name)) ?? 0) > Date.now(),
    record: async (name) => {
      const found = await read(name)
      return found ? JSON.stringify(found) : undefined
    },
    remainingMs: async (name) => {
      const ms = await until(name)
      return ms === undefined ? undefined : Math.max(0, ms - Date.now())
    },
    keys: async () => {
      const [entities] = await datastore.runQuery(datastore.createQuery(namespace, 'lock').select('__key__'))
      return entities.map((entity) => String(entity[datastore.KEY].name))
    },
    keyOf: (name) => name,
    cliArgs: () => ['--url', `datastore://${GOOGLE_TEST_PROJECT}/${namespace}`],
    close: async () => {},
  }
  clockSkew(() => sut)
  taskOutlivesLock(() => sut)
  badLockNames(() => sut)
})

describe('datastore options', () => {
  hostileOptions('datastore', [
    {
      option: 'kind',
      build: (kind, client) => datastoreLockProvider({ datastore: client, kind }),
      safe: (v) => v !== '' && !/^__.*__$/s.test(v) && Buffer.byteLength(v) <= 1500,
    },
    {
      option: 'namespace',
      build: (namespace, client) => datastoreLockProvider({ datastore: client, namespace }),
      safe: (v) => /^[0-9A-Za-z._-]{0,100}$/.test(v),
    },
  ])
})
