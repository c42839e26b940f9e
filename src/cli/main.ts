#!/usr/bin/env node
import { readFileSync } from 'node:fs'
import { LockConfigurationError, LockProviderError } from '../core/errors.ts'
import { STORES } from '../providers/registry.ts'
import { type Command, CliError, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError, wantsHelp } from './command.ts'
import { dashboardCommand } from './dashboard.ts'
import { demoCommand } from './demo.ts'
import { demoWorkerCommand } from './demo-worker.ts'
import { doctorCommand } from './doctor.ts'
import { historyCommand } from './history.ts'
import { inertOutput } from './inert.ts'
import { initCommand } from './init.ts'
import { nearest } from './nearest.ts'
import { listCommand } from './list.ts'
import { pauseCommand, resumeCommand } from './pause.ts'
import { runCommand } from './run.ts'
import { schemaCommand } from './schema.ts'
import { statusCommand } from './status.ts'
import { triggerCommand } from './trigger.ts'
import { redactSecrets } from '../support/store-url.ts'
import { URL_FORMS } from './store-url.ts'
import { unlockCommand } from './unlock.ts'

// These modules hold no driver: a store's driver is imported when a command opens a URL of that store.
/** Every command, in the order of --help. */
const commands: readonly Command[] = [
  runCommand,
  listCommand,
  unlockCommand,
  pauseCommand,
  resumeCommand,
  triggerCommand,
  historyCommand,
  statusCommand,
  dashboardCommand,
  doctorCommand,
  initCommand,
  schemaCommand,
  demoCommand,
  demoWorkerCommand,
]

function version(): string {
  // package.json sits two folders up from dist/cli/main.js (and from src/cli/main.ts).
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown }
  return String(pkg.version)
}

function help(): string {
  const visible = commands.filter((c) => !c.hidden)
  const width = Math.max(...visible.map((c) => c.name.length))
  return `shedlock ${version()}: at most one node runs a scheduled task at a time
(distributed task locks, compatible with Java ShedLock's storage)

Usage: shedlock <command> [options]

Commands:
${visible.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Options:
  -h, --help     show this help; "shedlock <command> --help" shows a command's
  -v, --version  print the version

The store is a URL (--url, or the SHEDLOCK_URL environment variable):
${URL_FORMS}
Passwords in URLs are never printed. Each store needs its driver package,
installed in your project (looked for from the current directory first, then
next to shedlock):
${driverLines()}

Start with: shedlock demo

Exit codes: 0 ok, 1 failure, 2 usage error (shedlock run: the command's own;
skipped: 0, or --skipped-exit-code)
`
}

/** Each store's drivers, from the registry, wrapped within 80 columns. */
function driverLines(): string {
  const items = STORES.map(
    (store) =>
      `${store.title}: ${store.drivers.join(store.driversTogether ? ' and ' : store.drivers.length > 2 ? ', ' : ' or ')}`,
  )
  const lines: string[] = []
  for (const item of items) {
    const last = lines.at(-1)
    if (last !== undefined && last.length + item.length + 2 <= 78) lines[lines.length - 1] = `${last}; ${item}`
    else lines.push(`  ${item}`)
  }
  return lines.join('\n')
}

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv
  if (first === undefined) {
    process.stderr.write(help())
    return EXIT_USAGE
  }
  if (first === '-h' || first === '--help' || first === 'help') {
    const asked = first === 'help' ? rest[0] : undefined
    if (asked === undefined) {
      process.stdout.write(help())
      return EXIT_OK
    }
    const topic = commands.find((c) => c.name === asked && !c.hidden)
    if (!topic) {
      process.stderr.write(
        `shedlock: no help on ${JSON.stringify(asked)}: give a command, one of ${commands
          .filter((c) => !c.hidden)
          .map((c) => c.name)
          .join(', ')}\n`,
      )
      return EXIT_USAGE
    }
    process.stdout.write(topic.help)
    return EXIT_OK
  }
  if (first === '-v' || first === '--version') {
    process.stdout.write(`${version()}\n`)
    return EXIT_OK
  }
  const command = commands.find((c) => c.name === first)
  if (!command) {
    const what = first.startsWith('-')
      ? `unknown option ${JSON.stringify(first)}`
      : `unknown command ${JSON.stringify(first)}`
    const meant = nearestCommand(first)
    process.stderr.write(`shedlock: ${what}${meant ? `; did you mean "${meant}"?` : ''} (see shedlock --help)\n`)
    return EXIT_USAGE
  }
  if (wantsHelp(rest)) {
    process.stdout.write(command.help)
    return EXIT_OK
  }
  redactWrites(process.stdout)
  redactWrites(process.stderr)
  try {
    return await command.run(rest)
  } catch (error) {
    // Bad durations, lock names or table names are usage errors too: the command line holds them.
    if (error instanceof UsageError || error instanceof LockConfigurationError) {
      process.stderr.write(
        redactSecrets(
          `shedlock ${command.name}: ${flagNames(oneLine(error.message))} (see shedlock ${command.name} --help)\n`,
        ),
      )
      return EXIT_USAGE
    }
    const message = error instanceof Error ? error.message : String(error)
    // A store failure explains itself; anything else is a bug of ours, marked as such.
    const explained = error instanceof CliError || error instanceof LockProviderError
    process.stderr.write(
      redactSecrets(`shedlock ${command.name}: ${explained ? '' : 'unexpected error: '}${oneLine(message)}\n`),
    )
    if (!explained && process.env.SHEDLOCK_DEBUG && error instanceof Error)
      process.stderr.write(redactSecrets(`${error.stack}\n`))
    return EXIT_FAILURE
  }
}

/** The visible command, or the option of `shedlock --help`, nearest to a mistyped one, if any. */
function nearestCommand(typed: string): string | undefined {
  if (typed.startsWith('-')) return nearest(typed.replace(/=.*$/, ''), ['--help', '--version'])
  const visible = commands.filter((c) => !c.hidden).map((c) => c.name)
  return nearest(typed, visible)
}

/** The library's option names, as the command-line flags that set them. */
const FLAGS: readonly (readonly [RegExp, string])[] = [
  [/\blockAtMostFor\b/g, '--lock-at-most-for'],
  [/\blockAtLeastFor\b/g, '--lock-at-least-for'],
  [/\brunsTableName\b/g, '--runs-table'],
  [/\btableName\b/g, '--table'],
  [/^Lock name /, '--name '],
]

/**
 * A library error about the command line, in its words: validation in the core names the API's
 * options (`lockAtLeastFor`), which a CLI user never typed.
 */
function flagNames(message: string): string {
  return FLAGS.reduce((text, [pattern, flag]) => text.replace(pattern, flag), message)
}

/**
 * Makes every later write to `stream` pass through redactSecrets() and inertOutput(): the
 * commands' output (--json documents, doctor's details, history's error messages) and whatever a
 * driver logs, so that no path can print a password or a terminal's control sequence.
 * `shedlock run`'s command writes to the file descriptors it inherits, not through here: its
 * output is its own.
 */
function redactWrites(stream: NodeJS.WriteStream): void {
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean
  const clean = (text: string): string => inertOutput(redactSecrets(text))
  stream.write = ((chunk: unknown, ...rest: unknown[]): boolean => {
    if (typeof chunk === 'string') return write(clean(chunk), ...rest)
    if (chunk instanceof Uint8Array) {
      const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8')
      const redacted = clean(text)
      return write(redacted === text ? chunk : redacted, ...rest)
    }
    return write(chunk, ...rest)
  }) as typeof stream.write
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ')
}

/** Resolves once everything written to `stream` so far has been handed to the OS. */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()))
}

const code = await main(process.argv.slice(2))
process.exitCode = code
// Every command has closed its connections by now, but some drivers keep a timer running after
// close (ioredis, for 2 s after a refused AUTH): nothing is left to wait for once output is out.
await Promise.all([flushed(process.stdout), flushed(process.stderr)])
process.exit(code)
