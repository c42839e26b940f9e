/** True in CI (`CI=true` or `CI=1`): every store is required, and a failed test is retried once. */
export const inCI = process.env.CI === 'true' || process.env.CI === '1'

/**
 * Which stores a test run must reach. In CI (CI=true) every backend is required, and so is any
 * backend listed in SHEDLOCK_REQUIRED_BACKENDS (comma-separated, or "all"): a test that cannot
 * reach a required store fails. Elsewhere it is skipped, and says why.
 */
export function isRequired(backend: string): boolean {
  if (inCI) return true
  const listed = (process.env.SHEDLOCK_REQUIRED_BACKENDS ?? '').split(',').map((s) => s.trim())
  return listed.includes(backend) || listed.includes('all')
}

/**
 * Runs `connect`; returns its value, or `undefined` (after printing why) when the store is
 * unreachable and not required. Throws when it is required.
 */
export async function connectOrSkip<T>(
  backend: string,
  where: string,
  connect: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await connect()
  } catch (error) {
    const why = `${backend} is not reachable at ${where}: ${error instanceof Error ? error.message : String(error)}`
    if (isRequired(backend)) throw new Error(`${why} (required in this run)`, { cause: error })
    console.warn(
      `SKIPPED ${backend} tests: ${why}. Set CI=true or SHEDLOCK_REQUIRED_BACKENDS=${backend} to make this a failure.`,
    )
    return undefined
  }
}

/** A table name no other test file uses, so files can run in parallel on one database. */
export function uniqueTable(prefix: string): string {
  return `${prefix}_${process.pid}_${Math.floor(Math.random() * 1e9).toString(36)}`
}
