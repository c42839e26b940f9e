import { randomBytes } from 'node:crypto'
import { afterAll, describe } from 'vitest'
import { redisLockProvider } from '../../../src/providers/redis/index.ts'
import { REDIS_URL, dropRedisEnvironment, redisOrSkip, redisUrlIn } from '../../helpers/kv-clients.ts'
import { cliProof } from '../../cli/support/proof.ts'

const url = REDIS_URL
const client = await redisOrSkip()

describe.skipIf(!client)('shedlock CLI on Redis (the built bin)', () => {
  const redis = client!
  // Every key of this file lives under its own environment, deleted at the end.
  const environment = `cli-test-${process.pid}-${randomBytes(3).toString('hex')}`
  const cliUrl = redisUrlIn(environment, url)
  afterAll(async () => {
    // The locks, and the run history that shedlock run writes on Redis.
    await dropRedisEnvironment(redis, environment)
    redis.disconnect()
  })
  // The server has no password, but users exist in Redis 6+: an unknown one is refused (WRONGPASS) whatever the password.
  const wrong = new URL(url)
  wrong.username = 'shedlock-no-such-user'
  wrong.password = 'rd-s3cret-Pa55'

  cliProof({
    kind: /^Redis /,
    args: ['--url', cliUrl],
    provider: () => redisLockProvider({ client: redis, environment }),
    isHeld: async (name) => (await redis.exists(`job-lock:${environment}:${name}`)) === 1,
    init: { args: ['--url', cliUrl], first: /Redis needs no setup/, again: /Redis needs no setup/ },
    wrongPassword: { url: wrong.toString(), password: wrong.password, message: /WRONGPASS/ },
  })
})
