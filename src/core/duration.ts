import { LockConfigurationError } from './errors.ts'

/** A unit of a {@link DurationString}, in any letter case: `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`, `d`. */
export type DurationUnit =
  | 'ns'
  | 'NS'
  | 'Ns'
  | 'nS'
  | 'us'
  | 'US'
  | 'Us'
  | 'uS'
  | 'µs'
  | 'µS'
  | 'ms'
  | 'MS'
  | 'Ms'
  | 'mS'
  | 's'
  | 'S'
  | 'm'
  | 'M'
  | 'h'
  | 'H'
  | 'd'
  | 'D'

/**
 * A duration string, checked at compile time: `"1500"` (milliseconds), `"30s"`, `"10m"`, or
 * ISO-8601 (`"PT15M"`). Typos such as `"10 minutes"` or `"1w"` do not compile. The type cannot
 * say everything {@link parseDuration} checks: `"1.5s"` and `"-5s"` compile and are refused at run
 * time; surrounding spaces, which `parseDuration()` trims, do not compile. A duration from
 * configuration (a plain `string`) goes through `parseDuration()`, which takes any string and
 * returns milliseconds.
 */
export type DurationString = `${number}` | `${number}${DurationUnit}` | `P${string}` | `p${string}`

/**
 * A duration: a number of milliseconds, or a {@link DurationString} such as `"30s"`, `"10m"`,
 * `"1500"` (ms) or `"PT15M"` (ISO-8601). See {@link parseDuration}.
 */
export type Duration = number | DurationString

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
}

const WITH_UNIT = /^(\d+)(ns|us|µs|ms|s|m|h|d)?$/i
// Java's Duration.parse subset: days, hours, minutes and seconds; only seconds may have a fraction.
const ISO = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?$/i

const HELP = 'use milliseconds (1500), an integer with a unit ms, s, m, h or d ("30s", "10m"), or ISO-8601 ("PT15M")'

/**
 * Parses a duration to whole milliseconds.
 *
 * - numbers are milliseconds (fractions round up, so a positive duration never becomes 0);
 * - `"<integer><unit>"` with units `ns us ms s m h d`, case-insensitive (`ns`/`us` round up to
 *   whole milliseconds);
 * - a bare integer string is milliseconds (`"1500"`);
 * - ISO-8601 durations with days, hours, minutes and seconds (`"PT15M"`, `"PT0.5S"`, `"P1DT2H"`).
 *
 * @throws LockConfigurationError for negative, empty, non-finite, fractional non-ISO or unknown
 *   input; the message quotes the input.
 */
export function parseDuration(value: Duration | string): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0)
      throw invalid(value, 'it must be a finite number of milliseconds, 0 or more')
    return checkSafe(value, Math.ceil(value))
  }
  if (typeof value !== 'string') throw invalid(value, HELP)
  const known = PARSED.get(value)
  if (known !== undefined) return known
  const ms = parseText(value)
  if (PARSED.size >= PARSED_MAX) PARSED.clear()
  PARSED.set(value, ms)
  return ms
}

// Durations parsed, by their text: every call of a task passes the same few ("10m", "30s"), and
// the parse (a trim, one or two regular expressions) cost 3.9 k of the 97.5 k instructions of a
// PostgreSQL lock() + unlock(), 3.7 k of an executeWithLock() (scripts/instructions.mjs,
// 2026-12-08). Bounded: cleared when full.
const PARSED = new Map<string, number>()
const PARSED_MAX = 256

function parseText(value: string): number {
  const text = value.trim()
  if (text === '') throw invalid(value, `it is empty; ${HELP}`)
  if (text.startsWith('-')) throw invalid(value, 'durations cannot be negative')

  const withUnit = WITH_UNIT.exec(text)
  if (withUnit) {
    const unit = (withUnit[2] ?? 'ms').toLowerCase()
    const factor = UNIT_MS[unit] ?? 1
    return checkSafe(value, Math.ceil(Number(withUnit[1]) * factor))
  }

  const iso = ISO.exec(text)
  if (iso && /\d/.test(text) && !/T$/i.test(text)) {
    const [, days = '0', hours = '0', minutes = '0', seconds = '0', fraction = ''] = iso
    const fractionMs = fraction === '' ? 0 : Math.ceil(Number(`0.${fraction}`) * 1000)
    const ms =
      Number(days) * UNIT_MS.d! +
      Number(hours) * UNIT_MS.h! +
      Number(minutes) * UNIT_MS.m! +
      Number(seconds) * 1000 +
      fractionMs
    return checkSafe(value, ms)
  }
  throw invalid(value, HELP)
}

/** Formats milliseconds the way a person would write them: `500ms`, `30s`, `10m`, `2h`, `1d`, or `90500ms`. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const factor = UNIT_MS[unit]!
    if (ms >= factor && ms % factor === 0) return `${ms / factor}${unit}`
  }
  return `${ms}ms`
}

function checkSafe(input: unknown, ms: number): number {
  if (!Number.isSafeInteger(ms)) throw invalid(input, 'it is too large')
  // -0 (from -0 or Math.ceil(-0.1)) would print as "-0ms" in messages.
  return ms === 0 ? 0 : ms
}

function invalid(input: unknown, why: string): LockConfigurationError {
  return new LockConfigurationError(`Invalid duration ${quote(input)}: ${why}`)
}

function quote(input: unknown): string {
  return typeof input === 'string' ? JSON.stringify(input) : String(input)
}
