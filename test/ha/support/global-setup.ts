import { execFileSync } from 'node:child_process'

/**
 * Removes what a killed run of this suite left behind (its namespaces `sh<tag>-<node>`, their
 * processes, its bridges `shb<tag>`), before the run and after it: a worker killed by a time
 * limit runs no afterAll. Only names of this suite's pattern are touched.
 */
export default function setup(): () => void {
  sweep()
  return sweep
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
    if (!/^sh\d+-[a-z]\d$/.test(ns)) continue
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
}
