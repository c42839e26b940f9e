// The fencing counter's key: in the lock key's Redis Cluster slot, as Redis itself computes it
// (CLUSTER KEYSLOT of a cluster-enabled redis-server of this file's own), and never a lock key.
// cluster-key-slot, which ioredis and node-redis route by, differs from Redis on keys whose first
// `{` is followed at once by `}` (Redis then hashes the whole key): the server answers MOVED for
// those, and decides CROSSSLOT by its own slots, so the server is the reference here.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keySlot, redisFenceKey } from '../../../src/providers/redis/fence-key.ts'
import { redisOrSkip } from '../../helpers/kv-clients.ts'
import { freePort } from '../../helpers/processes.ts'

// Fails (in CI) or skips like the other Redis tests when no redis-server is installed.
;(await redisOrSkip())?.disconnect()

const awkward = [
  'job-lock:default:report',
  'job-lock:default:{tenant-1}:report',
  'job-lock:default:a}b',
  'job-lock:default:a{}b{c}',
  'job-lock:default:x{y',
  'job-lock:default:}{',
  'job-lock:default:€ ü 漢字 {ü}',
  '{app}:default:report',
]
const prefixes = ['', 'app:', '{app}:', 'a{p', 'a}p', 'a{']

const dir = mkdtempSync(join(tmpdir(), 'shedlock-fence-key-'))
let server: ChildProcess
let redis: Redis
const slotOf = async (key: string): Promise<number> => Number(await redis.call('CLUSTER', 'KEYSLOT', key))

beforeAll(async () => {
  const port = await freePort()
  server = spawn(
    'redis-server',
    ['--bind', '127.0.0.1', '--port', String(port), '--cluster-enabled', 'yes', '--dir', dir, '--save', ''],
    { stdio: 'ignore' },
  )
  redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 })
  redis.on('error', () => {})
  for (let i = 0; ; i++) {
    try {
      await redis.connect()
      await redis.ping()
      return
    } catch (error) {
      if (i > 100) throw error
      redis.disconnect()
      await sleep(100)
    }
  }
}, 30_000)

afterAll(() => {
  redis?.disconnect()
  server?.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
})

describe('redisFenceKey', () => {
  it('computes slots as Redis does', async () => {
    for (const key of [...awkward, 'a', '{}', '{a}', '{}{a}', ':{12}:fence:q', 'x'.repeat(5000)])
      expect(keySlot(key), key).toBe(await slotOf(key))
  })

  it('names the whole lock key as the hash tag when it has no braces', () => {
    expect(redisFenceKey('job-lock:default:report')).toBe(':{job-lock:default:report}:fence')
    // The client's keyPrefix comes first in both keys as Redis sees them.
    expect(redisFenceKey('job-lock:default:report', 'app:')).toBe(':{app:job-lock:default:report}:fence')
  })

  it('puts the counter in the slot of the lock key as Redis sees it, for every kind of key and client prefix', async () => {
    for (const prefix of prefixes)
      for (const key of awkward) {
        const fence = redisFenceKey(key, prefix)
        expect(await slotOf(prefix + fence), `${prefix}${key} -> ${fence}`).toBe(await slotOf(prefix + key))
        // No lock key starts with ':' (keyPrefix cannot be empty): no key space can hold a counter.
        expect(fence.startsWith(':')).toBe(true)
        expect(fence).not.toBe(redisFenceKey(`${key}x`, prefix))
      }
  })

  it('reaches every slot with decimal tags below 200,000', () => {
    const reached = new Set<number>()
    for (let n = 0; n < 200_000 && reached.size < 16384; n++) reached.add(keySlot(`:{${n}}:fence:x`))
    expect(reached.size).toBe(16384)
  })
})
