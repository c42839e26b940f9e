import type { ChildProcess } from 'node:child_process'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import type { PrivateNetwork } from './netns.ts'
import type { Holder, HolderReport } from './scenario.ts'

const SCRIPT = new URL('./holder.mjs', import.meta.url).pathname

/**
 * Starts support/holder.mjs in node `name`'s namespace of `net` (a namespace of its own, on the
 * store's bridge), with `job` (its store, the store's addresses, the lock's name and
 * lockAtMostFor). It runs the built package (npm run test:ha builds first).
 */
export function startHolder(
  net: PrivateNetwork,
  name: string,
  job: Record<string, unknown>,
  dir: string,
): Holder & { child: ChildProcess } {
  const child = net.spawnPiped(name, [process.execPath, SCRIPT, JSON.stringify(job)], { dir, log: `${name}.log` })
  const reports: HolderReport[] = []
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      reports.push(JSON.parse(line) as HolderReport)
    } catch {
      // Not a report (a driver's warning on stdout).
    }
  })
  return {
    child,
    async next(key, ms) {
      const deadline = Date.now() + ms
      for (;;) {
        const found = reports.find((r) => r[key] !== undefined)
        if (found) return found
        const failed = reports.find((r) => r.error !== undefined || r.skipped !== undefined)
        if (failed) throw new Error(`the holder did not get the lock: ${JSON.stringify(failed)}`)
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`the holder reported no ${key} within ${ms} ms (${JSON.stringify(reports)})`)
        await sleep(50)
      }
    },
  }
}
