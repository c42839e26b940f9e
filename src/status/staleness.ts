import { parseDuration } from '../core/duration.ts'
import { UsageError } from '../support/admin-errors.ts'

/**
 * What `--stale` (or the dashboard's `maxAge`) asks of the tasks: a maximum age of the last
 * success in milliseconds per task name, and for every other task (`undefined`: none).
 */
export interface Staleness {
  readonly byName: ReadonlyMap<string, number>
  readonly all: number | undefined
}

/**
 * Parses `--stale` values (`NAME=AGE` or `AGE`, AGE like 26h or PT26H), for `shedlock status`
 * and `shedlock dashboard`; a later entry for the same name, or a later bare AGE, wins.
 * @throws UsageError naming the bad entry.
 */
export function staleness(given: readonly string[]): Staleness {
  const byName = new Map<string, number>()
  let all: number | undefined
  for (const entry of given) {
    const equals = entry.lastIndexOf('=')
    const name = equals < 0 ? undefined : entry.slice(0, equals)
    const age = equals < 0 ? entry : entry.slice(equals + 1)
    let ms: number
    try {
      ms = parseDuration(age)
    } catch (error) {
      throw new UsageError(
        `--stale ${JSON.stringify(entry)}: ${error instanceof Error ? error.message : String(error)}; use NAME=AGE or AGE, e.g. --stale report=26h`,
      )
    }
    if (name === undefined) all = ms
    else if (name === '')
      throw new UsageError(`--stale ${JSON.stringify(entry)} names no task; use NAME=AGE, e.g. --stale report=26h`)
    else byName.set(name, ms)
  }
  return { byName, all }
}
