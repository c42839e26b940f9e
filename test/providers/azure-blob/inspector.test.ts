import assert from 'node:assert/strict'
import type { BlobServiceClient } from '@azure/storage-blob'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import { azureBlobLockInspector, azureBlobLockProvider } from '../../../src/providers/azure-blob/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { azuriteOrSkip, azuriteService, uniqueBucket } from '../../helpers/object-stores.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

const service = await azuriteOrSkip()
const HOUR = 3_600_000

describe.skipIf(!service)('azureBlobLockInspector (azurite)', () => {
  const container = (service as BlobServiceClient).getContainerClient(uniqueBucket('shedlock-azi'))
  const inspector = azureBlobLockInspector({ containerClient: container })
  beforeAll(async () => {
    await container.create()
  })
  afterAll(async () => {
    await container.deleteIfExists()
  })

  describe('inspector suite', () => {
    registerInspectorSuite(
      lockInspectorSuite({ provider: () => azureBlobLockProvider({ containerClient: container }), inspector }),
    )
  })

  it('list() reads metadata from the listing and releases what it listed (the listing gives bare ETags)', async () => {
    const provider = azureBlobLockProvider({ containerClient: container, prefix: 'listed/' })
    const lock = await provider.lock(lockConfiguration({ name: 'one', lockAtMostFor: '1h' }))
    assert.ok(lock)
    const local = azureBlobLockInspector({ containerClient: container, prefix: 'listed/' })
    const { locks } = await local.list()
    expect(locks.map((l) => [l.name, l.held])).toEqual([['one', true]])
    expect(locks[0]!.remainingMs).toBeGreaterThan(HOUR - 60_000)
    expect(await local.release(locks[0]!)).toBe(true)
    expect((await local.get('one'))?.held).toBe(false)
    expect(await local.removeExpired()).toBe(1)
    expect(await local.get('one')).toBeUndefined()
  })

  it('a blob without a valid lockUntil reads as held, with an unknown lockUntil, and removeExpired() keeps it', async () => {
    await container.getBlockBlobClient('shedlock/not-a-lock').upload('x', 1)
    expect(await inspector.get('not-a-lock')).toMatchObject({
      held: true,
      lockUntil: undefined,
      remainingMs: undefined,
    })
    await inspector.removeExpired({ prefix: 'not-a-lock' })
    expect(await inspector.get('not-a-lock')).toBeDefined()
  })

  it('rejects bad options, and a dead store with LockProviderError', async () => {
    expect(() => azureBlobLockInspector({ containerClient: null as never })).toThrow(LockConfigurationError)
    await expect(inspector.get('x'.repeat(1100))).rejects.toThrow(LockConfigurationError)
    const dead = azuriteService('http://127.0.0.1:1/devstoreaccount1', 1).getContainerClient(container.containerName)
    const error = await azureBlobLockInspector({ containerClient: dead })
      .list()
      .catch((e: unknown) => e)
    assert.ok(error instanceof LockProviderError)
    expect(error.message).toMatch(/^azure-blob: could not list the locks: Azure Storage is unreachable/)
  })
})
