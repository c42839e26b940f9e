import { execFileSync } from 'node:child_process'
import { readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { clearParts, mergeResults } from './results.ts'
import { fullMatrix, LOCK_AT_MOST_FOR } from './common.ts'

/**
 * Removes what a killed run of this suite left behind (its namespaces `sh<tag>-<node>`, their
 * processes, its bridges `shb<tag>`), before the run and after it: a worker killed by a time
 * limit runs no afterAll. Only names of this suite's pattern are touched.
 */
export default function setup(): () => void {
  const started = Date.now()
  sweep()
  clearParts()
  // A Ctrl-C or a kill of the run ends vitest without its teardown, and the worker without its
  // afterAll: sweep on the way out then too (synchronous, so it also runs in 'exit').
  process.once('exit', sweep)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      sweep()
      // Vitest's own handler (if any) ends the run; otherwise end as the signal would have.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    })
  }
  return () => {
    sweep()
    // Each file saved its rows (support/results.ts); the table covers the whole run.
    const table = mergeResults(LOCK_AT_MOST_FOR, Math.round((Date.now() - started) / 1000), fullMatrix)
    if (table) console.log(`\nReplicated topologies (test/ha/results/latest.md):\n\n${table}\n`)
  }
}

function sweep(): void {
  if (process.getuid?.() !== 0) return
  const run = (args: string[]): string => {
    try {
      return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    } catch {
      return ''
    }
  }
  for (const ns of run(['netns', 'list'])
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')) {
    if (!/^sh\d+-[a-z]+\d$/.test(ns)) continue
    for (const pid of run(['netns', 'pids', ns]).split('\n').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL')
      } catch {
        // Gone.
      }
    }
    run(['netns', 'del', ns])
  }
  for (const line of run(['-o', 'link', 'show', 'type', 'bridge']).split('\n')) {
    const name = /^\d+: (shb\d+):/.exec(line)?.[1]
    if (name) run(['link', 'del', name])
  }
  // The servers' data folders (test/ha/topologies.test.ts names them shedlock-ha-*).
  for (const entry of readdirSync(tmpdir())) {
    if (!process.env.SHEDLOCK_HA_KEEP && entry.startsWith('shedlock-ha-'))
      rmSync(join(tmpdir(), entry), { recursive: true, force: true })
  }
}
