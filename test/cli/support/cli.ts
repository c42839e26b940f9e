import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll } from 'vitest'
import { killStartedProcesses, type NodeProcess, type ProcessRun, startNode } from '../../helpers/processes.ts'

/** The CLI as users run it: the built bin (`npm test` builds first; while developing, `npm run build`). */
export const MAIN: string = fileURLToPath(new URL('../../../dist/cli/main.js', import.meta.url))

/** What a finished CLI process left. */
export type CliRun = ProcessRun

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
export type StartedCli = NodeProcess

afterAll(killStartedProcesses)

/** Starts `node dist/cli/main.js ...args` with stdin closed (never a terminal) and piped output. */
export function startCli(args: readonly string[], options: CliOptions = {}): StartedCli {
  const main = options.main ?? MAIN
  if (!existsSync(main)) throw new Error(`${main} is missing: run "npm run build" first`)
  return startNode([main, ...args], {
    // The SDK's notice about Node 20 would be a second line on stderr of every DynamoDB command.
    env: {
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED:
        process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ?? 'true',
      ...options.env,
    },
    ...(options.cwd ? { cwd: options.cwd } : {}),
  })
}

/** Runs the CLI to its end. */
export function cli(args: readonly string[], options: CliOptions = {}): Promise<CliRun> {
  return startCli(args, options).done
}

export { waitFor } from '../../helpers/processes.ts'

/** The lines of a text, without the final newline. */
export function lines(text: string): string[] {
  return text.replace(/\n$/, '').split('\n')
}

/** A `shedlock list --json` document. */
export interface ListJson {
  store: string
  clock: string
  now: string
  locks: {
    name: string
    state: 'held' | 'free'
    lockedBy: string | null
    lockedAt: string | null
    lockUntil: string | null
    remainingMs: number | null
  }[]
}
