import { parseArgs } from 'node:util'
import { parseDuration } from '../core/duration.ts'
import { nearest } from './nearest.ts'

/** Exit codes of every command; `shedlock --help` documents them. */
export const EXIT_OK = 0
export const EXIT_FAILURE = 1
export const EXIT_USAGE = 2
/** After Ctrl-C, as shells report SIGINT. */
export const EXIT_INTERRUPTED = 130

/** One entry of the command table in main.ts. */
export interface Command {
  readonly name: string
  /** One line for `shedlock --help`. */
  readonly summary: string
  /** Full text of `shedlock <name> --help`. */
  readonly help: string
  /** Internal commands are left out of `shedlock --help`. */
  readonly hidden?: boolean
  /** Runs with the arguments after the command name; resolves to the exit code. Throws UsageError for bad arguments. */
  run(args: string[]): Promise<number>
}

export { CliError, UsageError } from '../support/admin-errors.ts'
import { UsageError } from '../support/admin-errors.ts'

/** Options of one command, as `node:util` parseArgs takes them (strings and booleans only). */
export type OptionSpec = Record<string, { type: 'string' | 'boolean'; short?: string }>

/** Parsed option values: strings for `string` options, `true` for booleans given, absent otherwise. */
export type OptionValues = Record<string, string | boolean | undefined>

/**
 * Parses a command's arguments strictly: no positionals, no unknown options.
 * @throws UsageError naming the bad argument.
 */
export function parseOptions(args: string[], options: OptionSpec): OptionValues {
  try {
    const { values } = parseArgs({ args, options, strict: true, allowPositionals: false })
    return values as OptionValues
  } catch (error) {
    throw usageErrorOf(error, args, options, false)
  }
}

/**
 * Parses a command's options and its positional arguments (a lock name): options may come before
 * or after them, and `--` ends the options (what follows is positional, even when it starts with `-`).
 * @throws UsageError naming the bad argument.
 */
export function parseArguments(args: string[], options: OptionSpec): { values: OptionValues; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({ args, options, strict: true, allowPositionals: true })
    return { values: values as OptionValues, positionals }
  } catch (error) {
    throw usageErrorOf(error, args, options, true)
  }
}

/**
 * parseArgs' error in the words of the CLI's other messages (`unknown option "--jsn"; did you mean
 * "--json"?`), naming the argument as typed: parseArgs names `-o` for `-odd`.
 */
function usageErrorOf(error: unknown, args: string[], options: OptionSpec, positionals: boolean): UsageError {
  const { code, message = String(error) } = (error ?? {}) as { code?: unknown; message?: string }
  const quoted = /'([^']*)'/.exec(message)?.[1] ?? ''
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const end = args.indexOf('--')
    const typed =
      args
        .slice(0, end === -1 ? args.length : end)
        .find((arg) => arg === quoted || arg.startsWith(quoted.startsWith('--') ? `${quoted}=` : quoted))
        ?.replace(/=.*$/, '') ?? quoted
    const meant = nearest(typed, [...Object.keys(options).map((name) => `--${name}`), '--help'])
    const hint = meant
      ? `; did you mean "${meant}"?`
      : positionals && !typed.startsWith('--')
        ? '; a name that starts with "-" goes after "--"'
        : ''
    return new UsageError(`unknown option ${JSON.stringify(typed)}${hint}`)
  }
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL')
    return new UsageError(`unexpected argument ${JSON.stringify(quoted)}: this command takes options only`)
  const missing = /^Option '(?:-\w, )?(--[\w-]+) <value>' argument missing/.exec(message)?.[1]
  if (missing !== undefined) return new UsageError(`${missing} needs a value`)
  const valued = /^Option '(?:-\w, )?(--[\w-]+)' does not take an argument/.exec(message)?.[1]
  if (valued !== undefined) return new UsageError(`${valued} takes no value`)
  const ambiguous = /^Option '(?:-\w, )?(--[\w-]+)' argument is ambiguous/.exec(message)?.[1]
  if (ambiguous !== undefined)
    return new UsageError(`${ambiguous} needs a value; one that starts with "-" is written ${ambiguous}=-VALUE`)
  return new UsageError(message.split('\n')[0]!.replace(/\.$/, ''))
}

/**
 * A whole number option within [min, max], or `fallback` when absent.
 * @throws UsageError for anything else.
 */
export function integerOption(values: OptionValues, name: string, fallback: number, min: number, max: number): number {
  const raw = values[name]
  if (raw === undefined) return fallback
  const value = typeof raw === 'string' && /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`)
  }
  return value
}

/** What {@link durationOption} accepts besides a duration: 0 (`zero`, default true), and the example its error ends with. */
export interface DurationRules {
  readonly zero?: boolean
  /** e.g. `a duration like 1m or 90s`. */
  readonly hint?: string
}

/**
 * A duration option (`90s`, `1m`, `PT1M`, milliseconds) in milliseconds.
 * @throws UsageError naming `flag` for anything else, or for 0 where `rules.zero` is false.
 */
export function durationOption(flag: string, value: string | boolean, rules: DurationRules = {}): number {
  const hint = rules.hint === undefined ? '' : `; use ${rules.hint}`
  let ms: number
  try {
    ms = parseDuration(String(value))
  } catch (error) {
    throw new UsageError(`${flag}: ${error instanceof Error ? error.message : String(error)}${hint}`)
  }
  if (ms === 0 && rules.zero === false)
    throw new UsageError(`${flag} must be longer than 0, got ${JSON.stringify(value)}`)
  return ms
}

/** True when `args` ask for help (`-h` or `--help` before any `--`). */
export function wantsHelp(args: string[]): boolean {
  for (const arg of args) {
    if (arg === '--') return false
    if (arg === '--help' || arg === '-h') return true
  }
  return false
}

export { firstLine as messageOf } from '../support/admin-errors.ts'
