import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import memjs from 'memjs'
import { afterAll, describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { memcachedLockKey, memcachedLockProvider } from '../../../src/providers/memcached/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { cli, lines } from '../../cli/support/cli.ts'

const where = (process.env.SHEDLOCK_MEMCACHED_URL ?? '127.0.0.1:11211').replace(/^memcached:\/\//, '')
const client = await connectOrSkip('memcached', `${where} (SHEDLOCK_MEMCACHED_URL)`, async () => {
  const c = memjs.Client.create(where, { logger: { log: () => {} } })
  try {
    await c.get('shedlock:probe')
  } catch (error) {
    c.close()
    throw error
  }
  return c
})

describe.skipIf(!client)('shedlock CLI on memcached (the built bin)', () => {
  const memcached = client!
  const environment = `cli-test-${process.pid}-${randomBytes(3).toString('hex')}`
  const url = `memcached://${where}?environment=${environment}`
  const names: string[] = []
  afterAll(async () => {
    for (const name of names) await memcached.delete(memcachedLockKey(name, environment)).catch(() => {})
    memcached.close()
  })
  const provider = memcachedLockProvider({ client: memcached, environment })
  const hold = async (what: string): Promise<string> => {
    const name = `cli-${what} ${randomBytes(3).toString('hex')}`
    names.push(name)
    expect(await provider.lock(lockConfiguration({ name, lockAtMostFor: '5m' }))).toBeDefined()
    return name
  }
  const isHeld = async (name: string): Promise<boolean> =>
    (await memcached.get(memcachedLockKey(name, environment))).value !== null

  it('list refuses in one line, exit 1: memcached cannot enumerate keys', async () => {
    await hold('listed')
    const run = await cli(['list', '--url', url])
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(lines(run.stderr)).toHaveLength(1)
    expect(run.stderr).toMatch(
      /^shedlock list: memcached cannot enumerate its keys, so its locks cannot be listed; .*shedlock unlock/,
    )
  })

  it('unlock --yes reads the holder of one named lock (key encoded as the provider does) and deletes it', async () => {
    const name = await hold('unlock')
    const run = await cli(['unlock', '--url', url, '--name', name, '--yes'])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain(`lock "${name}" is held by ${hostname()}:${process.pid}:`)
    expect(run.stdout).toContain('until an expiry the store does not reveal')
    expect(run.stdout).toContain(`released lock "${name}"`)
    expect(await isHeld(name)).toBe(false)
  })

  it('run skips a held lock, naming its holder, and --keep-alive is refused: memcached locks cannot be extended', async () => {
    const name = await hold('run')
    const skipped = await cli(['run', '--url', url, '--name', name, '--lock-at-most-for', '1m', '--', 'true'])
    expect(skipped.code, skipped.stderr).toBe(0)
    expect(skipped.stdout).toMatch(new RegExp(`^skipped: lock "${name}" is held by ${hostname()}:${process.pid}:`))
    const keepAlive = await cli([
      'run',
      '--url',
      url,
      '--name',
      name,
      '--lock-at-most-for',
      '1m',
      '--keep-alive',
      '--',
      'true',
    ])
    expect(keepAlive.code).toBe(2)
    expect(keepAlive.stderr).toMatch(
      /--keep-alive needs a store whose locks can be extended; memcached locks cannot be/,
    )
  })

  it('init needs nothing and doctor passes, its write check leaving no key', async () => {
    const init = await cli(['init', '--url', url])
    expect(init.code).toBe(0)
    expect(init.stdout).toContain('memcached needs no setup')
    const doctor = await cli(['doctor', '--url', url])
    expect(doctor.code, doctor.stdout).toBe(0)
    expect(doctor.stdout).toMatch(
      /^ {2}ok {4}write: took lock "shedlock-doctor-[0-9a-f]{8}" \(read back held by .*\), released it, removed its record$/m,
    )
    expect(doctor.stdout).toMatch(/^ {2}-- {4}clock: not measured: /m)
  })
})
