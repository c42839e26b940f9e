import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, lockConfiguration } from '../../../src/index.ts'
import { denoKvLockInspector, denoKvLockProvider } from '../../../src/providers/deno-kv/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'

// shedlock/deno-kv runs in Deno, so its suites run there: conformance.ts, on the built package,
// spawned here. Deno comes from SHEDLOCK_DENO (a path to the binary), the npm package `deno`
// (its binary), or PATH; in CI (CI=true) a missing Deno fails this file.

const run = promisify(execFile)
const script = fileURLToPath(new URL('./conformance.ts', import.meta.url))
const root = fileURLToPath(new URL('../../../', import.meta.url))

function denoCandidates(): string[] {
  const found: string[] = []
  if (process.env.SHEDLOCK_DENO) found.push(process.env.SHEDLOCK_DENO)
  const exe = process.platform === 'win32' ? 'deno.exe' : 'deno'
  try {
    // npm's deno: its postinstall links the binary of the platform's package next to it; without
    // install scripts, the platform package (an optional dependency) still holds it.
    const require = createRequire(import.meta.url)
    const manifest = require.resolve('deno/package.json')
    found.push(join(dirname(manifest), exe))
    const platforms = Object.keys(
      (require(manifest) as { optionalDependencies?: Record<string, string> }).optionalDependencies ?? {},
    )
    for (const name of platforms) {
      try {
        found.push(join(dirname(createRequire(manifest).resolve(`${name}/package.json`)), exe))
      } catch {
        // another platform's package, not installed
      }
    }
  } catch {
    // not installed from npm
  }
  return [...found.filter((path) => existsSync(path)), 'deno']
}

const deno = await connectOrSkip('deno', 'SHEDLOCK_DENO, the npm package deno, or PATH', async () => {
  const failures: string[] = []
  for (const candidate of denoCandidates()) {
    try {
      const { stdout } = await run(candidate, ['--version'])
      if (/^deno 2\./.test(stdout)) return candidate
      failures.push(`${candidate}: not Deno 2 (${stdout.split('\n')[0]})`)
    } catch (error) {
      failures.push(`${candidate}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`)
    }
  }
  throw new Error(`no Deno 2 found (${failures.join('; ')}); npm install deno, or set SHEDLOCK_DENO`)
})

const workDir = mkdtempSync(join(tmpdir(), 'shedlock-deno-kv-'))
afterAll(() => rmSync(workDir, { recursive: true, force: true }))

describe.skipIf(!deno)('denoKvLockProvider under Deno', () => {
  it('passes the conformance and inspector suites in Deno, on a KV file shared by two handles', async () => {
    if (!existsSync(join(root, 'dist/providers/deno-kv/index.js')))
      throw new Error('dist/ is missing: npm run build first')
    const result = await run(deno!, ['run', '-A', '--unstable-kv', script, join(workDir, 'locks.kv')], {
      cwd: root,
      timeout: 90_000,
    }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`deno failed: ${error.message}\n${error.stdout ?? ''}\n${error.stderr ?? ''}`)
    })
    const summary = /deno-kv: (\d+) passed, (\d+) failed, (\d+) skipped/.exec(result.stdout)
    expect(summary, result.stdout).not.toBeNull()
    expect(Number(summary![2]), result.stdout).toBe(0)
    expect(Number(summary![3]), result.stdout).toBe(0)
    expect(Number(summary![1])).toBeGreaterThanOrEqual(47)
  }, 100_000)
})

// What needs no Deno: the options are checked before anything is sent.
describe('denoKvLockProvider options', () => {
  // A KV where every key is missing and every commit loses: lock() resolves to undefined.
  const atomic = { check: () => atomic, set: () => atomic, delete: () => atomic, commit: async () => ({ ok: false }) }
  const kv = {
    get: async () => ({ key: [], value: null, versionstamp: null }),
    list: async function* () {},
    atomic: () => atomic,
  }

  it('rejects what is not a Deno.Kv, and an empty keyPrefix or lockedBy, with LockConfigurationError', () => {
    expect(() => denoKvLockProvider({ kv: {} as never })).toThrow(/pass your Deno.Kv as \{ kv \}/)
    expect(() => denoKvLockInspector({ kv: undefined as never })).toThrow(LockConfigurationError)
    expect(() => denoKvLockProvider({ kv, keyPrefix: '' })).toThrow(/keyPrefix must be a non-empty string/)
    expect(() => denoKvLockProvider({ kv, lockedBy: ' ' })).toThrow(/lockedBy must be a non-empty string/)
    expect(() => denoKvLockProvider({ kv, expireAfter: 'soon' as never })).toThrow(LockConfigurationError)
  })

  it('a name whose key is over 2048 bytes rejects before anything is sent, counting UTF-8 bytes', async () => {
    const provider = denoKvLockProvider({ kv })
    await expect(provider.lock(lockConfiguration({ name: 'é'.repeat(1019), lockAtMostFor: '1m' }))).rejects.toThrow(
      /is 2050 bytes, and deno-kv holds at most 2048/,
    )
    await expect(
      provider.lock(lockConfiguration({ name: 'é'.repeat(1018), lockAtMostFor: '1m' })),
    ).resolves.toBeUndefined()
  })
})
