import assert from 'node:assert/strict'
import { describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { datastoreLockInspector, datastoreLockProvider } from '../../../src/providers/datastore/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'
import { emulatorOrSkip } from './emulator.ts'

const emulator = await emulatorOrSkip()

describe.skipIf(!emulator)('datastoreLockInspector (the Datastore emulator)', () => {
  const { datastore, namespace } = emulator!
  const key = (name: string) => datastore.key({ namespace, path: ['lock', name] })
  const read = async (name: string) => (await datastore.get(key(name)))[0] as Record<string, unknown> | undefined
  const provider = () => datastoreLockProvider({ datastore })
  const inspector = () => datastoreLockInspector({ datastore })
  const unique = (what: string) => `${what}-${Math.random().toString(36).slice(2)}`

  describe('contract', () => {
    registerInspectorSuite(lockInspectorSuite({ provider, inspector: inspector() }))
  })

  it("a force-release keeps the entity with lock_until now and locked_by 'released'; the holder's release changes nothing", async () => {
    const name = unique('row')
    const holder = await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }))
    assert.ok(holder)
    const before = await read(name)
    const releasedAt = Date.now()
    expect(await inspector().release(name)).toBe(true)
    const after = await read(name)
    expect(after?.locked_by).toBe('released')
    expect(after?.locked_at).toEqual(before?.locked_at)
    expect(after?.fencing_token).toEqual(before?.fencing_token)
    expect((after!.lock_until as Date).getTime()).toBeGreaterThanOrEqual(releasedAt)
    await holder.unlock()
    expect((await read(name))?.locked_by).toBe('released')
    expect(await inspector().release(name)).toBe(false)
  })

  it('an entity without lock_until reads as held, with no lockUntil, and no node can take it', async () => {
    const name = unique('broken')
    await datastore.insert({ key: key(name), data: { locked_by: 'someone' } })
    expect(await inspector().get(name)).toMatchObject({ name, held: true, lockUntil: undefined, lockedBy: 'someone' })
    expect(await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m' }))).toBeUndefined()
  })

  it('lists across query batches, and a prefix selects only its names', async () => {
    const prefix = unique('many')
    const names = Array.from({ length: 620 }, (_, i) => `${prefix}@${String(i).padStart(4, '0')}`)
    const until = new Date(Date.now() + 60_000)
    for (let i = 0; i < names.length; i += 250)
      await datastore.insert(
        names.slice(i, i + 250).map((name) => ({ key: key(name), data: { lock_until: until, locked_by: 'other' } })),
      )
    assert.ok(await provider().lock(lockConfiguration({ name: `${prefix}-not-a-slot`, lockAtMostFor: '1m' })))
    const { locks } = await inspector().list({ prefix: `${prefix}@` })
    expect(locks.map((lock) => lock.name)).toEqual(names)
    expect((await inspector().list()).locks.length).toBeGreaterThanOrEqual(names.length + 1)
  })
})
