import { describe, expect, it } from 'vitest'
import { parseStoreUrl } from '../../../src/cli/store-url.ts'
import { cli, lines } from '../../cli/support/cli.ts'

// No MongoDB server runs here (see the README): these cases cover what works without one.
describe('shedlock CLI with MongoDB URLs (the built bin; no server)', () => {
  it('mongodb:// and mongodb+srv:// pick the MongoDB store, host lists included, with the password redacted', () => {
    for (const url of [
      'mongodb://app:pw-s3cret@127.0.0.1:27017/app',
      'mongodb+srv://app:pw-s3cret@cluster0.example.net/app',
      'mongodb://app:pw-s3cret@h1:27017,h2:27017/app?replicaSet=rs',
    ]) {
      const parsed = parseStoreUrl(url)
      expect(parsed.scheme).toBe('mongodb')
      expect(parsed.redacted).toBe(url.replace(':pw-s3cret@', ':***@'))
    }
  })

  it('an unreachable server is one line, exit 1, without the password', async () => {
    const run = await cli(['list', '--url', 'mongodb://app:pw-s3cret@127.0.0.1:1/app?serverSelectionTimeoutMS=300'])
    expect(run.code).toBe(1)
    expect(lines(run.stderr)).toHaveLength(1)
    expect(run.stderr).toMatch(
      /^shedlock list: cannot reach MongoDB at mongodb:\/\/app:\*\*\*@127\.0\.0\.1:1\/app\?serverSelectionTimeoutMS=300: .*ECONNREFUSED/,
    )
    expect(run.stderr).not.toContain('pw-s3cret')
  })

  it('doctor reports the unreachable server as a failed check', async () => {
    const run = await cli(['doctor', '--url', 'mongodb://127.0.0.1:1/app?serverSelectionTimeoutMS=300'])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(/^ {2}FAIL {2}reachable: cannot reach MongoDB/m)
  })
})
