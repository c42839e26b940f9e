import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { LockConfigurationError } from '../core/errors.ts'
import type { CronTimeLike } from './scheduler-types.ts'

/** What `import('cron')` gives: its `CronTime` class. */
interface CronModuleLike {
  CronTime?: CronTimeConstructor
  default?: { CronTime?: CronTimeConstructor }
}

/** cron's `CronTime` constructor: `new CronTime(source, timeZone?, utcOffset?)`. */
export type CronTimeConstructor = new (
  source: unknown,
  timeZone?: string | null,
  utcOffset?: number | null,
) => CronTimeLike

let cronTimeClass: Promise<CronTimeConstructor> | undefined

/**
 * cron's `CronTime`, imported at first use: the package that `@nestjs/schedule` runs on, found
 * from this package or next to `@nestjs/schedule`. Never a dependency of shedlock.
 *
 * @throws LockConfigurationError when neither finds it.
 */
export function loadCronTime(): Promise<CronTimeConstructor> {
  cronTimeClass ??= importCronTime().catch((error: unknown) => {
    cronTimeClass = undefined
    throw new LockConfigurationError(
      'slot: true and catch-up of @Cron methods compute fire times with the "cron" package (what @nestjs/schedule runs on), which could not be imported; install it (npm i cron) or pass slot: (...args) => Date',
      { cause: error },
    )
  })
  return cronTimeClass
}

async function importCronTime(): Promise<CronTimeConstructor> {
  // A variable specifier: TypeScript does not resolve it, and bundlers leave it alone.
  const specifier = 'cron'
  let module: CronModuleLike
  try {
    module = (await import(specifier)) as CronModuleLike
  } catch (error) {
    // Not resolvable from here (a nested install): next to @nestjs/schedule, whose dependency it is.
    try {
      const schedule = import.meta.resolve('@nestjs/schedule')
      module = (await import(pathToFileURL(createRequire(schedule).resolve(specifier)).href)) as CronModuleLike
    } catch {
      throw error
    }
  }
  const CronTime = module.CronTime ?? module.default?.CronTime
  if (typeof CronTime !== 'function') throw new Error('the "cron" package has no CronTime export')
  return CronTime
}
