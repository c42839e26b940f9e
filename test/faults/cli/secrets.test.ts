import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { recordFigure } from '../support/figures.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { freePort, SECRET_PASSWORD, SECRET_USER, startPostgres, startRedis } from '../support/servers.ts'

const run = promisify(execFile)
const CLI = fileURLToPath(new URL('../../../dist/cli/main.js', import.meta.url))
// A password that must be percent-encoded in a URL: the CLI must hide both spellings.
const ODD_PASSWORD = 'S3cr:t p@ss/w%rd'
const encoded = encodeURIComponent(ODD_PASSWORD)

// Our own PostgreSQL (SCRAM for the secret user) and a Redis with requirepass: the URLs that work.
const servers = await connectOrSkip('postgres', "servers of the fault suite's own", async () => ({
  postgres: await startPostgres(),
  redis: await startRedis({ password: SECRET_PASSWORD }),
}))
afterAll(async () => {
  await servers?.postgres.destroy()
  await servers?.redis.destroy()
})

/** Output of one CLI run, whatever its exit code. */
async function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 60_000,
): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      env: { ...process.env, NODE_DEBUG: 'shedlock', ...env },
      timeout: timeoutMs,
    })
    return { code: 0, output: stdout + stderr }
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` }
  }
}

/**
 * The commands that take a store URL, with the arguments each needs besides it (from their
 * --help), and how long each may run: `dashboard` serves until stopped (an unreachable store
 * included, which it shows and retries), so it is stopped after a few seconds, once it has
 * opened its stores and printed what it prints.
 */
async function urlCommands(): Promise<{ command: string; args: string[]; timeoutMs: number }[]> {
  const help = (await cli(['--help'])).output
  const names = [...help.matchAll(/^ {2}([a-z][a-z-]*) {2,}/gm)].map((m) => m[1]!)
  const commands: { command: string; args: string[]; timeoutMs: number }[] = []
  for (const command of names) {
    const text = (await cli([command, '--help'])).output
    if (!text.includes('--url')) continue
    const args: string[] = []
    if (text.includes('--name')) args.push('--name', 'faults-secrets')
    if (text.includes('--lock-at-most-for')) args.push('--lock-at-most-for', '10s')
    if (text.includes('--yes')) args.push('--yes')
    if (/-- COMMAND/.test(text)) args.push('--', process.execPath, '-e', '0')
    // A task NAME in the usage line: given, so that the command goes as far as the store instead
    // of stopping at its usage error. A pause of a name of its own, for a second: `run` locks
    // faults-secrets meanwhile.
    if (/^Usage: shedlock [a-z-]+ NAME\b/m.test(text) && !args.includes('--name')) {
      if (command === 'pause') args.push('faults-secrets-pause', '--for', '1s')
      else if (command === 'resume') args.push('faults-secrets-pause')
      else args.push('faults-secrets')
    }
    const serves = command === 'dashboard'
    if (serves) args.push('--port', '0')
    commands.push({ command, args, timeoutMs: serves ? 8_000 : 60_000 })
  }
  return commands
}

describe.skipIf(!servers)('cli: connection passwords never reach the output', () => {
  it('every command taking --url (or SHEDLOCK_URL), with NODE_DEBUG=shedlock, prints no password: wrong password, right password, closed port', async () => {
    expect(existsSync(CLI), `${CLI} is missing: run "npm run build" first`).toBe(true)
    const s = servers!
    const commands = await urlCommands()
    expect(
      commands.map((c) => c.command),
      'commands that take --url',
    ).toContain('run')
    const closed = await freePort()
    const urls = [
      {
        what: 'postgres, right password',
        url: `postgres://${SECRET_USER}:${SECRET_PASSWORD}@127.0.0.1:${s.postgres.port}/postgres`,
        secret: SECRET_PASSWORD,
      },
      {
        what: 'postgres, wrong password',
        url: `postgres://${SECRET_USER}:${encoded}@127.0.0.1:${s.postgres.port}/postgres`,
        secret: ODD_PASSWORD,
      },
      {
        what: 'postgres, closed port',
        url: `postgres://${SECRET_USER}:${encoded}@127.0.0.1:${closed}/postgres`,
        secret: ODD_PASSWORD,
      },
      {
        what: 'mysql, closed port',
        url: `mysql://${SECRET_USER}:${encoded}@127.0.0.1:${closed}/test`,
        secret: ODD_PASSWORD,
      },
      {
        what: 'redis, right password',
        url: `redis://:${SECRET_PASSWORD}@127.0.0.1:${s.redis.port}`,
        secret: SECRET_PASSWORD,
      },
      { what: 'redis, wrong password', url: `redis://:${encoded}@127.0.0.1:${s.redis.port}`, secret: ODD_PASSWORD },
      {
        what: 'mongodb, closed port',
        url: `mongodb://${SECRET_USER}:${encoded}@127.0.0.1:${closed}/test?serverSelectionTimeoutMS=1000`,
        secret: ODD_PASSWORD,
      },
    ]
    // The lock table, so that the runs with the right password get as far as locking.
    const init = await cli(['init', '--url', urls[0]!.url])
    expect(init.code, `shedlock init:\n${init.output}`).toBe(0)
    const runs: { label: string; args: string[]; env?: NodeJS.ProcessEnv; secret: string; timeoutMs?: number }[] = []
    for (const u of urls) {
      for (const c of commands)
        runs.push({
          label: `${c.command} (${u.what})`,
          args: [c.command, '--url', u.url, ...c.args],
          secret: u.secret,
          timeoutMs: c.timeoutMs,
        })
      runs.push({
        label: `run with SHEDLOCK_URL (${u.what})`,
        args: ['run', '--name', 'faults-secrets', '--lock-at-most-for', '10s', '--', process.execPath, '-e', '0'],
        env: { SHEDLOCK_URL: u.url },
        secret: u.secret,
      })
    }
    // Four at a time: each run is a Node process that loads a driver.
    const results: { label: string; code: number; output: string; secret: string }[] = []
    for (let i = 0; i < runs.length; i += 4) {
      results.push(
        ...(await Promise.all(
          runs
            .slice(i, i + 4)
            .map(async (r) => ({ label: r.label, secret: r.secret, ...(await cli(r.args, r.env, r.timeoutMs)) })),
        )),
      )
    }
    for (const r of results) {
      for (const secret of [r.secret, encodeURIComponent(r.secret)]) {
        expect(r.output.includes(secret), `${r.label} printed the password (exit ${r.code}):\n${r.output}`).toBe(false)
      }
    }
    // The runs must have done something: a connection refused or denied shows in the output, and the working URLs lock.
    expect(results.filter((r) => r.output.trim() !== '').length, 'runs with output').toBeGreaterThan(results.length / 2)
    const locked = results.find((r) => r.label === 'run (postgres, right password)')
    expect(locked?.code, `run with the right postgres password:\n${locked?.output}`).toBe(0)
    recordFigure({
      store: 'cli',
      group: 'secrets',
      faults: 0,
      inputs: results.length + 1,
      note: `${results.length + 1} runs (init, then ${commands.map((c) => c.command).join(', ')}) with password URLs and SHEDLOCK_URL, NODE_DEBUG=shedlock: no password in the output`,
    })
  }, 300_000)
})
