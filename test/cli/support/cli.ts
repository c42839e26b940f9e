import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll } from 'vitest'

/** The CLI as users run it: the built bin (`npm test` builds first; while developing, `npm run build`). */
export const MAIN: string = fileURLToPath(new URL('../../../dist/cli/main.js', import.meta.url))

/** What a finished CLI process left. */
export interface CliRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Options of {@link startCli}. */
export interface CliOptions {
  /** Added to this process's environment; `undefined` values remove a variable. */
  env?: Record<string, string | undefined>
  /** The built bin to run. @default MAIN */
  main?: string
  /** Working directory: the user's project, where drivers are looked for first. @default this process's */
  cwd?: string
}

/** A CLI process that runs on. */
export interface StartedCli {
  child: ChildProcess
  /** Resolves when the output pipes close too, which a grandchild holding them delays. */
  done: Promise<CliRun>
  /** Resolves to the exit code as soon as the process exits. */
  exited: Promise<number | null>
  stdout(): string
  stderr(): string
}

const started: ChildProcess[] = []
afterAll(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

/** Starts `node dist/cli/main.js ...args` with stdin closed (never a terminal) and piped output. */
export function startCli(args: readonly string[], options: CliOptions = {}): StartedCli {
  const main = options.main ?? MAIN
  if (!existsSync(main)) throw new Error(`${main} is missing: run "npm run build" first`)
  const env: Record<string, string | undefined> = { ...process.env, ...options.env }
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key]
  // The SDK's notice about Node 20 would be a second line on stderr of every DynamoDB command.
  env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'
  const child = spawn(process.execPath, [main, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: env as NodeJS.ProcessEnv,
    ...(options.cwd ? { cwd: options.cwd } : {}),
  })
  started.push(child)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const done = new Promise<CliRun>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, done, exited, stdout: () => stdout, stderr: () => stderr }
}

/** Runs the CLI to its end. */
export function cli(args: readonly string[], options: CliOptions = {}): Promise<CliRun> {
  return startCli(args, options).done
}

export { waitFor } from '../../support/processes.ts'

/** The lines of a text, without the final newline. */
export function lines(text: string): string[] {
  return text.replace(/\n$/, '').split('\n')
}

/** A `shedlock list --json` document. */
export interface ListJson {
  store: string
  clock: string
  now: string
  locks: { name: string; state: 'held' | 'free'; lockedBy: string | null; lockedAt: string | null; lockUntil: string | null; remainingMs: number | null }[]
}
