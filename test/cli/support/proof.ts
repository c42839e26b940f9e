import type { Duration } from '../../../src/core/duration.ts'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LockProvider, lockConfiguration, type SimpleLock, slotRecordName } from '../../../src/index.ts'
import { noDoubleRunInAnyAttempt } from '../../helpers/double-runs.ts'
import { cli, type CliRun, type ListJson, lines, startCli, waitFor } from './cli.ts'

/** A store under test, as the proof needs it. */
export interface ProofStore {
  /** The store's name in output, e.g. "PostgreSQL". */
  kind: string | RegExp
  /** `--url URL [--table NAME]`: where the proof's locks live. */
  args: string[]
  /** A provider in this test process, over the same locks, for holding one while the CLI looks. */
  provider(): LockProvider
  /** Reads the store directly (not through the CLI or a provider): is `name` held now? */
  isHeld(name: string): Promise<boolean>
  /** `--url URL [--table NAME]` of a place `init` has not seen, and what the first and the second `init` there say. */
  init: { args: string[]; first: RegExp; again: RegExp }
  /** Arguments that name the store without its table, for a doctor that must fail; `undefined` when the store has no table. */
  missingLayout?: { args: string[]; advice: RegExp }
  /** A store URL with a wrong password that must not show in any output (`undefined`: the server has no authentication to get wrong). */
  wrongPassword?: { url: string; password: string; message: RegExp }
  /** The largest `lockAtMostFor` the kill -9 case waits for, in ms; 3 s unless the store rounds up to seconds. @default 3000 */
  killLockAtMostForMs?: number
}

/**
 * The CLI proof of issue 5, against one real store, through the built bin: init twice, list
 * before/while/after a lock, unlock (refused without --yes and a terminal), doctor (healthy and
 * failing), run from three processes at once, exit codes and signals passed through, and a
 * kill -9 of the runner leaving the lock to expire at lockAtMostFor.
 */
export function cliProof(store: ProofStore): void {
  cliBasics(store, { run: true })
}

/** Context shared by the cases of one store. */
interface ProofContext {
  lockName(what: string): string
  dir: string
  hold(name: string, lockAtMostFor?: Duration): Promise<SimpleLock>
  list(): Promise<ListJson>
}

/** init, list, unlock, doctor and secrets against one store; with `run`, the `shedlock run` cases too. */
export function cliBasics(store: ProofStore, options: { run?: boolean } = {}): void {
  const prefix = `cli-${process.pid}-${randomBytes(3).toString('hex')}`
  let counter = 0
  const lockName = (what: string): string => `${prefix}-${what}-${++counter}`
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-cli-proof-'))
  const held: SimpleLock[] = []
  beforeAll(async () => {
    const run = await cli(['init', ...store.args])
    assert.equal(run.code, 0, run.stderr)
  })
  afterAll(async () => {
    for (const lock of held) await lock.unlock().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  })
  const hold = async (name: string, lockAtMostFor: Duration = '5m'): Promise<SimpleLock> => {
    const lock = await store.provider().lock(lockConfiguration({ name, lockAtMostFor }))
    assert.ok(lock, `could not take lock ${name}`)
    held.push(lock)
    return lock
  }
  const list = async (): Promise<ListJson> => {
    const run = await cli(['list', ...store.args, '--json'])
    assert.equal(run.code, 0, run.stderr)
    return JSON.parse(run.stdout) as ListJson
  }
  const expectOneLineError = (run: CliRun, code: number): void => {
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(code)
    expect(lines(run.stderr)).toHaveLength(1)
    expect(run.stderr).toMatch(/^shedlock \w+: /)
  }

  describe('init', () => {
    it('creates what the store needs, then reports that nothing was left to do', async () => {
      const first = await cli(['init', ...store.init.args])
      expect(first.code, first.stderr).toBe(0)
      expect(first.stdout).toMatch(store.init.first)
      const again = await cli(['init', ...store.init.args])
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout).toMatch(store.init.again)
    })
  })

  describe('list', () => {
    it('shows a lock before, while and after a provider in another process holds it, in JSON and as a table', async () => {
      const name = lockName('list')
      expect((await list()).locks.find((l) => l.name === name)).toBeUndefined()

      const lock = await hold(name, '10m')
      const whileHeld = await list()
      const entry = whileHeld.locks.find((l) => l.name === name)
      assert.ok(entry, `${name} missing from ${JSON.stringify(whileHeld)}`)
      expect(entry.state).toBe('held')
      const now = Date.parse(whileHeld.now)
      expect(Math.abs(now - Date.now())).toBeLessThan(5_000)
      expect(entry.lockUntil).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      // lockAtMostFor 10m, seen from the store's clock: between 9 and 10 minutes left.
      expect(entry.remainingMs).toBeGreaterThan(9 * 60_000)
      expect(entry.remainingMs).toBeLessThanOrEqual(10 * 60_000 + 1_000)
      if (entry.lockedBy !== null) expect(entry.lockedBy.startsWith(`${hostname()}:${process.pid}:`)).toBe(true)
      if (entry.lockedAt !== null) expect(Math.abs(Date.parse(entry.lockedAt) - now)).toBeLessThan(10_000)

      const table = await cli(['list', ...store.args, '--format', 'table'])
      expect(table.code, table.stderr).toBe(0)
      const [header, blank, columns, ...rows] = lines(table.stdout)
      expect(header).toMatch(store.kind)
      expect(header).toMatch(/\d+ locks?, \d+ held; now \d{4}-\d\d-\d\dT[\d:.]+Z on /)
      expect(blank).toBe('')
      expect(columns).toMatch(/^NAME +STATE +LOCKED BY +LOCKED AT \(UTC\) +LOCK UNTIL \(UTC\) +REMAINING$/)
      const row = rows.find((r) => r.startsWith(`${name} `))
      // 9m 59s or less; a store that counts whole seconds of its own (etcd's leases) shows 10m 0s or 10m 1s
      // within the first second, which the JSON's remainingMs bound above allows too.
      expect(row, table.stdout).toMatch(/ held +.* \d{4}-\d\d-\d\dT[\d:.]+Z +(?:9m \d+s|10m [01]s)$/)

      await lock.unlock()
      const after = (await list()).locks.find((l) => l.name === name)
      // SQL keeps the row with lock_until in the past; key-value stores delete the key.
      if (after) expect(after.state).toBe('free')
    })
  })

  describe('list of slot records', () => {
    it('hides slot records unless --slots, counting them; --prefix selects by name', async () => {
      const name = lockName('slots')
      await hold(name)
      await hold(slotRecordName(name, new Date('2026-11-24T02:00:00.000Z')), '1h')
      const listed = async (...extra: string[]): Promise<ListJson & { slotRecords: number }> => {
        const run = await cli(['list', ...store.args, '--prefix', name, '--json', ...extra])
        assert.equal(run.code, 0, run.stderr)
        return JSON.parse(run.stdout) as ListJson & { slotRecords: number }
      }
      const hidden = await listed()
      expect(hidden.locks.map((l) => l.name)).toEqual([name])
      expect(hidden.slotRecords).toBe(1)
      expect((await listed('--slots')).locks.map((l) => l.name)).toEqual([name, `${name}@20261124T020000Z`])
      const table = await cli(['list', ...store.args, '--prefix', name])
      expect(table.code, table.stderr).toBe(0)
      expect(lines(table.stdout)[0]).toMatch(/1 lock, 1 held \(1 slot record hidden: --slots\); now /)
    })
  })

  describe('names', () => {
    it('a name with a slash, a colon, a space and an accent comes back as it was, and can be released by it', async () => {
      const name = `${lockName('odd')} a/b:c é`
      await hold(name)
      const entry = (await list()).locks.find((l) => l.name === name)
      expect(entry?.state).toBe('held')
      const run = await cli(['unlock', ...store.args, '--name', name, '--yes'])
      expect(run.code, run.stderr).toBe(0)
      expect(await store.isHeld(name)).toBe(false)
    })
  })

  describe('unlock', () => {
    it('without --yes and without a terminal refuses with exit 2, saying to pass --yes, and releases nothing', async () => {
      const name = lockName('refused')
      await hold(name)
      const run = await cli(['unlock', ...store.args, '--name', name])
      expectOneLineError(run, 2)
      expect(run.stderr).toContain('pass --yes')
      expect(await store.isHeld(name)).toBe(true)
    })

    it('--yes shows the holder and releases the lock; another process can take it at once', async () => {
      const name = lockName('unlock')
      await hold(name)
      const run = await cli(['unlock', ...store.args, '--name', name, '--yes'])
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toMatch(new RegExp(`^lock "${name}" is held by .* until `, 'm'))
      expect(run.stdout).toContain(`released lock "${name}"`)
      expect(await store.isHeld(name)).toBe(false)
      const again = await cli([
        'run',
        ...store.args,
        '--name',
        name,
        '--lock-at-most-for',
        '1m',
        '--',
        process.execPath,
        '-e',
        'process.exit(0)',
      ])
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout).not.toContain('skipped')
    })

    it('says so, with exit 1, when there is no such lock', async () => {
      const run = await cli(['unlock', ...store.args, '--name', lockName('never'), '--yes'])
      expectOneLineError(run, 1)
      expect(run.stderr).toContain('no lock named')
    })
  })

  describe('doctor', () => {
    it('passes on a healthy store, taking and releasing its own lock', async () => {
      const run = await cli(['doctor', ...store.args])
      expect(run.code, run.stdout + run.stderr).toBe(0)
      expect(run.stdout).toMatch(/^ {2}ok {4}reachable: /m)
      expect(run.stdout).toMatch(
        /^ {2}ok {4}write: took lock "shedlock-doctor-[0-9a-f]{8}" \(read back held.*\), released it, removed its record$/m,
      )
      expect(run.stdout).toMatch(/^ {2}(ok|--) {2,4}clock: /m)
      expect(run.stdout).toMatch(/^healthy: \d+ ok, 0 warnings, 0 failed$/m)
      expect((await list()).locks.filter((l) => l.name.startsWith('shedlock-doctor-'))).toEqual([])
    })

    // Stores without a table (Redis, etcd, ZooKeeper, memcached) have no such case.
    if (store.missingLayout)
      it('fails with exit 1 when the table is missing, naming the fix', async () => {
        const run = await cli(['doctor', ...store.missingLayout!.args])
        expect(run.code, run.stdout).toBe(1)
        expect(run.stdout).toMatch(/^ {2}FAIL {2}table .*: does not exist; create it with: shedlock init /m)
        expect(run.stdout).toMatch(store.missingLayout!.advice)
        expect(run.stdout).toMatch(/^ {2}-- {4}write: not tried/m)
        expect(run.stdout).toMatch(/^unhealthy: /m)
      })
  })

  if (options.run) runCases(store, { lockName, dir, hold, list })

  // Only stores whose test server checks credentials can get a wrong password.
  if (store.wrongPassword)
    describe('secrets', () => {
      it('a wrong password is never printed, in errors or anywhere else', async () => {
        const { url, password, message } = store.wrongPassword!
        for (const args of [
          ['list', '--url', url],
          ['doctor', '--url', url],
          ['unlock', '--url', url, '--name', 'x', '--yes'],
        ]) {
          const run = await cli(args)
          expect(run.code, run.stdout + run.stderr).toBe(1)
          expect(run.stdout + run.stderr).not.toContain(password)
          expect(run.stdout + run.stderr).toContain(':***@')
          expect(run.stdout + run.stderr).toMatch(message)
        }
        const viaEnv = await cli(['list'], { env: { SHEDLOCK_URL: url } })
        expect(viaEnv.code).toBe(1)
        expect(viaEnv.stderr).not.toContain(password)
      })
    })
}

/** The `shedlock run` cases. */
function runCases(store: ProofStore, { lockName, dir }: ProofContext): void {
  describe('run', () => {
    it('from three processes at once: exactly one runs the command, the others exit 0 with the skipped line', async () => {
      const name = lockName('three')
      const marker = join(dir, `${name}.ran`)
      // Each run appends a line and stays a while, so the three attempts overlap.
      const script = `require('node:fs').appendFileSync(${JSON.stringify(marker)}, process.pid + '\\n'); setTimeout(() => {}, 2000)`
      const runs = await Promise.all(
        [1, 2, 3].map(() =>
          cli([
            'run',
            ...store.args,
            '--name',
            name,
            '--lock-at-most-for',
            '1m',
            '--lock-at-least-for',
            '5s',
            '--',
            process.execPath,
            '-e',
            script,
          ]),
        ),
      )
      const ran = existsSync(marker) ? lines(readFileSync(marker, 'utf8')) : []
      noDoubleRunInAnyAttempt('extra runs of the command', ran.length - 1)
      for (const run of runs) expect(run.code, run.stderr).toBe(0)
      expect(ran).toHaveLength(1)
      const skipped = runs.filter((r) => r.stdout.startsWith('skipped: '))
      expect(skipped).toHaveLength(2)
      for (const run of skipped) {
        expect(lines(run.stdout)).toHaveLength(1)
        expect(run.stdout).toMatch(
          new RegExp(
            `^skipped: lock "${name}" is held by .* until (\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z \\(\\d+s left\\)|an expiry the store does not reveal)$`,
            'm',
          ),
        )
      }
      // lockAtLeastFor: released when the command ended, yet held 5 s from the start.
      expect(await store.isHeld(name)).toBe(true)
    })

    if (store.missingLayout)
      it('does not run the command when the table is missing: exit 1, naming shedlock init', async () => {
        const marker = join(dir, 'must-not-exist')
        const run = await cli([
          'run',
          ...store.missingLayout!.args,
          '--name',
          lockName('no-table'),
          '--lock-at-most-for',
          '1m',
          '--',
          'touch',
          marker,
        ])
        expect(run.code).toBe(1)
        expect(lines(run.stderr)).toHaveLength(1)
        expect(run.stderr).toMatch(/does not exist; create it with: shedlock init .*; the command was not run$/m)
        expect(existsSync(marker)).toBe(false)
      })

    it('passes the exit code through', async () => {
      const run = await cli([
        'run',
        ...store.args,
        '--name',
        lockName('exit'),
        '--lock-at-most-for',
        '1m',
        '--',
        'sh',
        '-c',
        'echo out; echo err >&2; exit 7',
      ])
      expect(run.code).toBe(7)
      expect(run.stdout).toBe('out\n')
      expect(run.stderr).toBe('err\n')
    })

    it('a command killed by SIGTERM makes shedlock exit 143', async () => {
      const run = await cli([
        'run',
        ...store.args,
        '--name',
        lockName('killed'),
        '--lock-at-most-for',
        '1m',
        '--',
        'sh',
        '-c',
        'kill -TERM $$',
      ])
      expect(run.code).toBe(143)
    })

    it('passes SIGTERM on to the command, exits 143 and releases the lock', async () => {
      const name = lockName('forward')
      const pidFile = join(dir, `${name}.pid`)
      const runner = startCli([
        'run',
        ...store.args,
        '--name',
        name,
        '--lock-at-most-for',
        '1m',
        '--',
        'sh',
        '-c',
        `echo $$ > ${pidFile}; exec sleep 30`,
      ])
      expect(
        await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'), 15_000),
        runner.stderr(),
      ).toBe(true)
      const commandPid = Number(readFileSync(pidFile, 'utf8'))
      expect(await store.isHeld(name)).toBe(true)
      runner.child.kill('SIGTERM')
      const run = await runner.done
      expect(run.code, run.stderr).toBe(143)
      expect(isAlive(commandPid)).toBe(false)
      expect(await store.isHeld(name)).toBe(false)
    })

    it('after kill -9 of the runner, the lock stays held until lockAtMostFor, then frees itself', async () => {
      const name = lockName('kill9')
      const pidFile = join(dir, `${name}.pid`)
      const lockAtMostFor = store.killLockAtMostForMs ?? 3_000
      const startedAt = Date.now()
      const runner = startCli([
        'run',
        ...store.args,
        '--name',
        name,
        '--lock-at-most-for',
        `${lockAtMostFor}ms`,
        '--',
        'sh',
        '-c',
        `echo $$ > ${pidFile}; exec sleep 30`,
      ])
      try {
        expect(
          await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'), 15_000),
          runner.stderr(),
        ).toBe(true)
        runner.child.kill('SIGKILL')
        // Not `done`: the orphaned command still holds the output pipes.
        await runner.exited
        const killedAt = Date.now()
        expect(await store.isHeld(name)).toBe(true)
        // Still held well after the runner died, while lockAtMostFor has not passed.
        const probe = Math.max(killedAt + 200, startedAt + lockAtMostFor / 2) - Date.now()
        if (probe > 0) await sleep(probe)
        if (Date.now() < startedAt + lockAtMostFor - 300) expect(await store.isHeld(name)).toBe(true)
        // Free once lockAtMostFor has passed (plus the store's expiry granularity).
        expect(await waitFor(async () => !(await store.isHeld(name)), lockAtMostFor + 5_000)).toBe(true)
        expect(Date.now() - startedAt).toBeGreaterThanOrEqual(lockAtMostFor - 1_000)
        const next = await cli(['run', ...store.args, '--name', name, '--lock-at-most-for', '1m', '--', 'true'])
        expect(next.code, next.stderr).toBe(0)
        expect(next.stdout).toBe('')
      } finally {
        // The orphaned command outlives its runner by design; the test ends it.
        if (existsSync(pidFile)) {
          try {
            process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGKILL')
          } catch {
            // Already gone.
          }
        }
      }
    })
  })
}

/** Alive and not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return true
  }
}
