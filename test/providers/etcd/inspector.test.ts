import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { Etcd3 } from 'etcd3'
import { afterAll, describe, expect, it } from 'vitest'
import {
  type ExtensibleLock,
  LockConfigurationError,
  LockProviderError,
  lockConfiguration,
} from '../../../src/index.ts'
import { etcdLockInspector, etcdLockProvider } from '../../../src/providers/etcd/index.ts'
import { lockInspectorSuite } from '../../../src/testing/index.ts'
import { etcdOrSkip } from '../../helpers/kv-clients.ts'
import { registerInspectorSuite } from '../../helpers/register-suite.ts'

const etcd = await etcdOrSkip()

// The TTL etcd really grants for a 1-second lease: it raises TTLs below its minimum (2 s by default).
const minimumTtlSeconds = etcd ? await measureMinimumTtl(etcd) : 1

describe.skipIf(!etcd)('etcdLockInspector', () => {
  const client = etcd!
  // Every key of this file is under environments that start with this, removed at the end.
  const environment = `inspect-${process.pid}-${randomUUID().slice(0, 8)}`
  const keyOf = (name: string, env = environment): string => `shedlock:${env}:${name}`
  const environments = new Set([environment])
  const extraClients: Etcd3[] = []
  afterAll(async () => {
    for (const env of environments) {
      const { kvs } = await client.getAll().prefix(`shedlock:${env}:`).exec()
      for (const kv of kvs) if (kv.lease !== '0') await client.leaseClient.leaseRevoke({ ID: kv.lease }).catch(() => {})
      await client.delete().prefix(`shedlock:${env}:`)
    }
    for (const extra of extraClients) extra.close()
    client.close()
  })
  const provider = (env = environment) => etcdLockProvider({ client, environment: env })
  const inspector = etcdLockInspector({ client, environment })

  registerInspectorSuite(
    lockInspectorSuite({
      provider: () => provider(),
      inspector,
      // Sleeps scale with the shortest lease etcd grants.
      timeGranularityMs: minimumTtlSeconds * 1000,
    }),
  )

  it('a force-release deletes the key; the holder can neither extend it nor hold it again within lockAtLeastFor', async () => {
    for (const ends of ['unlock', 'extend'] as const) {
      const name = `deleted-${ends}-${randomUUID()}`
      const lock = (await provider().lock(lockConfiguration({ name, lockAtMostFor: '1m', lockAtLeastFor: '30s' }))) as
        | ExtensibleLock
        | undefined
      assert.ok(lock)
      expect(await inspector.release(name)).toBe(true)
      expect(await client.get(keyOf(name)).string()).toBeNull()
      if (ends === 'extend') expect(await lock.extend('1m', '30s')).toBeUndefined()
      else await lock.unlock()
      expect(await client.get(keyOf(name)).string()).toBeNull()
      expect(await inspector.get(name)).toBeUndefined()
      expect(await inspector.release(name)).toBe(false)
    }
  })

  it('lockUntil: the time in the value plus the granted TTL for a fresh lease; within a second of the lease’s end after an extension', async () => {
    const name = `until-${randomUUID()}`
    const lock = (await provider().lock(lockConfiguration({ name, lockAtMostFor: '10500ms' }))) as
      | ExtensibleLock
      | undefined
    assert.ok(lock)
    const fresh = await inspector.get(name)
    assert.ok(fresh?.lockedAt && fresh.lockUntil)
    // The lease of 10.5 s is granted as 11 s, right after the value was written.
    expect(fresh.lockUntil.getTime() - fresh.lockedAt.getTime()).toBe(11_000)
    expect(fresh.remainingMs).toBeGreaterThan(9_000)
    const extended = await lock.extend('40s', 0)
    assert.ok(extended)
    const expected = Date.now() + 40_000
    const after = await inspector.get(name)
    assert.ok(after?.lockUntil)
    expect(after.lockedAt).toEqual(fresh.lockedAt)
    expect(Math.abs(after.lockUntil.getTime() - expected)).toBeLessThanOrEqual(1_500)
    expect(after.held).toBe(true)
    await extended.unlock()
  })

  it('reads a lock written by Java ShedLock (a lease of lockAtMostFor, ADDED:<time>@<host>), and a key without a lease', async () => {
    const name = `java-${randomUUID()}`
    const lockedAt = Date.now()
    const lease = client.lease(60, { autoKeepAlive: false })
    await lease.put(keyOf(name)).value(`ADDED:${new Date(lockedAt).toISOString()}@java-host`)
    const record = await inspector.get(name)
    assert.ok(record)
    expect(record).toMatchObject({ name, lockedBy: 'java-host', lockedAt: new Date(lockedAt), held: true })
    expect(Math.abs(record.lockUntil!.getTime() - (lockedAt + 60_000))).toBeLessThan(1_000)
    // A stale record: another holder's value now.
    await lease.put(keyOf(name)).value(`ADDED:${new Date().toISOString()}@other-java-host`)
    expect(await inspector.release(record)).toBe(false)
    expect(await client.get(keyOf(name)).string()).toMatch(/@other-java-host$/)
    expect(await inspector.release(name)).toBe(true)
    await lease.revoke()

    // Neither shedlock nor Java writes a key without a lease: it is held until deleted, expiry unknown.
    await client.put(keyOf(`${name}-bare`)).value('locked')
    expect(await inspector.get(`${name}-bare`)).toMatchObject({
      lockUntil: undefined,
      lockedAt: undefined,
      lockedBy: undefined,
      held: true,
      remainingMs: undefined,
    })
    expect(await inspector.release(`${name}-bare`)).toBe(true)
  })

  it('lists names with colons, slashes, spaces and any Unicode, and nothing of another environment', async () => {
    const env = `${environment}-names`
    environments.add(env)
    environments.add(`${env}x`)
    const names = ['a:b:c', 'with space', 'slash/ed', 'star*', 'é-ü-日本-🔒', ' leading space']
    const locks = await Promise.all(
      names.map((name) => provider(env).lock(lockConfiguration({ name, lockAtMostFor: '1m' }))),
    )
    // An environment that starts with the same text: its keys are outside the prefix, which ends with ':'.
    const other = await provider(`${env}x`).lock(lockConfiguration({ name: 'other', lockAtMostFor: '1m' }))
    const { now, locks: records } = await etcdLockInspector({ client, environment: env }).list()
    expect(records.map((record) => record.name)).toEqual([...names].sort())
    expect(Math.abs(now.getTime() - Date.now())).toBeLessThan(2_000)
    for (const record of records)
      expect(record).toMatchObject({ held: true, lockedBy: expect.stringMatching(/:\d+:[0-9a-f]+$/) })
    for (const lock of [...locks, other]) await lock!.unlock()
    expect((await etcdLockInspector({ client, environment: env }).list()).locks).toEqual([])
  })

  it('provider.inspector() inspects the provider’s keys; a handle’s lockedBy is the owner in its value', async () => {
    const name = `own-${randomUUID()}`
    const p = provider()
    const lock = await p.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(lock)
    const own = p.inspector!()
    expect(own.name).toBe('etcd')
    const record = await own.get(name)
    expect(record?.held).toBe(true)
    expect(record?.lockedBy).toBe(lock.lockedBy)
    expect((await own.list({ prefix: name })).locks.map((r) => r.name)).toEqual([name])
    await lock.unlock()
  })

  it('refuses bad options with LockConfigurationError; an unreachable server rejects with LockProviderError', async () => {
    for (const options of [{ environment: 'a:b' }, { environment: '' }, { timeout: 0 }]) {
      expect(() => etcdLockInspector({ client, ...options } as never), JSON.stringify(options)).toThrow(
        LockConfigurationError,
      )
    }
    expect(() => etcdLockInspector({ client: {} } as never)).toThrow(/pass your Etcd3 client/)
    // A key longer than the provider's 512 KiB: refused before it reaches etcd3 (and its circuit breaker).
    await expect(inspector.get('x'.repeat(512 * 1024))).rejects.toThrow(LockConfigurationError)
    await expect(inspector.release('x'.repeat(512 * 1024))).rejects.toThrow(LockConfigurationError)
    expect(await inspector.get('still-works')).toBeUndefined()
    const dead = new Etcd3({ hosts: 'http://127.0.0.1:1' })
    extraClients.push(dead)
    const unreachable = etcdLockInspector({ client: dead, environment, timeout: '3s' })
    await expect(unreachable.list()).rejects.toThrow(LockProviderError)
    await expect(unreachable.get('x')).rejects.toThrow(/^etcd: could not inspect lock "x": etcd is unreachable/)
  })
})

async function measureMinimumTtl(client: Etcd3): Promise<number> {
  const { ID, TTL } = await client.leaseClient.leaseGrant({ TTL: 1 })
  await client.leaseClient.leaseRevoke({ ID })
  return Math.max(1, Number(TTL))
}
