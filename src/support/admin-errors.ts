/**
 * Errors of the store administration layer (the per-store `admin.ts` modules and the CLI on top
 * of them). The CLI prints either on one line: a `UsageError` exits with 2, a `CliError` with 1.
 */

/** A bad command line, URL or option: the user must change what they asked for. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** A failure explained by its message (a store unreachable, a driver missing). */
export class CliError extends Error {
  override name = 'CliError'
}

/** The first line of an error's message, for one-line reports. */
export function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!
}
