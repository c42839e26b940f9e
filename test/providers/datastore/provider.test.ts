import assert from 'node:assert/strict'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { datastoreLockProvider } from '../../../src/providers/datastore/index.ts'
import { lockProviderSuite } from '../../../src/testing/index.ts'
import { registerSuite } from '../../helpers/register-suite.ts'
import { emulatorOrSkip, unreachableDatastore } from './emulator.ts'

const emulator = await emulatorOrSkip()

describe.skipIf(!emulator)('datastore provider (the Datastore emulator)', () => {
  const { datastore, namespace } = emulator!
  const key = (name: string) => datastore.key({ namespace, path: ['lock', name] })
  const read = async (name: string): Promise<Record<string, unknown> | undefined> =>
    (await datastore.get(key(name), { wrapNumbers: true }))[0] as Record<string, unknown> | undefined
  const provider = () => datastoreLockProvider({ datastore })
  const unique = (what: string) => `${what}-${Math.random().toString(36).slice(2)}`

  describe('conformance suite', () => {
    registerSuite(
      lockProviderSuite({
        provider,
        isLocked: async (name) => {
          const until = (await read(name))?.lock_until
          return until instanceof Date && until.getTime() > Date.now()
        },
        deleteRecord: async (name) => {
          await datastore.delete(key(name))
        },
        unreachableProvider: () => datastoreLockProvider({ datastore: unreachableDatastore() }),
        extensible: true,
        fencing: true,
        slots: { inspector: true },
        // A key's name holds at most 1500 bytes.
        maxNameLength: 1500,
      }),
    )
  })

  it('takes the client’s namespace, or the one given', async () => {
    const name = unique('namespace')
    const other = `${namespace}-other`
    const lock = await datastoreLockProvider({ datastore, namespace: other }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    assert.ok(lock)
    expect(await read(name)).toBeUndefined()
    const [stored] = await datastore.get(datastore.key({ namespace: other, path: ['lock', name] }))
    expect(stored?.locked_by).toBe(lock.lockedBy)
    // The client's namespace holds another lock of the same name.
    assert.ok(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' })))
  })

  it('a kind of its own keeps its locks apart from the default kind', async () => {
    const name = unique('kind')
    assert.ok(
      await datastoreLockProvider({ datastore, kind: 'shedlock_other' }).lock(
        lockConfiguration({ name, lockAtMostFor: '1m' }),
      ),
    )
    expect(await read(name)).toBeUndefined()
    assert.ok(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' })))
  })

  it('rejects bad options and Datastore’s reserved names before anything is sent, naming the fix', async () => {
    expect(() => datastoreLockProvider({} as never)).toThrow(/pass your client as \{ datastore \}/)
    expect(() => datastoreLockProvider({ datastore, kind: '__kind__' })).toThrow(LockConfigurationError)
    expect(() => datastoreLockProvider({ datastore, namespace: 'a/b' })).toThrow(/namespace must be/)
    expect(() => datastoreLockProvider({ datastore, lockedBy: ' ' })).toThrow(/lockedBy must be a non-empty string/)
    const error = await provider()
      .lock(lockConfiguration({ name: '__reserved__', lockAtMostFor: '1m' }))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockConfigurationError)
    expect(String(error)).toMatch(/"__reserved__" is reserved by Datastore/)
  })

  it('an unreachable endpoint rejects with LockProviderError naming the lock, within seconds', async () => {
    const started = Date.now()
    const error = await datastoreLockProvider({ datastore: unreachableDatastore() })
      .lock(lockConfiguration({ name: 'dead-store', lockAtMostFor: '1m' }))
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockProviderError)
    expect(String(error)).toMatch(/datastore: could not acquire lock "dead-store": Datastore is unreachable/)
    expect(Date.now() - started).toBeLessThan(15_000)
  }, 30_000)
})
