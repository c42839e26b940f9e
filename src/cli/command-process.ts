// The command `shedlock run` runs: spawned with this process's stdio, the signals shedlock gets
// passed on to it, and the lock's fencing token in its environment.
import { type ChildProcess, spawn } from 'node:child_process'
import { constants } from 'node:os'

/** Signals passed on to the command; anything else keeps its default effect on shedlock. */
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const

/** The variable that gives the command its lock's fencing token. */
export const FENCING_TOKEN_VARIABLE = 'SHEDLOCK_FENCING_TOKEN'

/**
 * The command's environment: shedlock's own, with {@link FENCING_TOKEN_VARIABLE} set to the lock's
 * token in decimal, or removed where the store hands out none, so that a value inherited from an
 * outer `shedlock run` is never taken for this lock's.
 */
export function commandEnvironment(
  environment: NodeJS.ProcessEnv,
  fencingToken: bigint | undefined,
): NodeJS.ProcessEnv {
  const { [FENCING_TOKEN_VARIABLE]: _inherited, ...rest } = environment
  return fencingToken === undefined ? rest : { ...rest, [FENCING_TOKEN_VARIABLE]: fencingToken.toString() }
}

/** A command that did not exit 0: the run history records it as failed, with this message; shedlock exits with `exitCode`. */
export class CommandFailedError extends Error {
  override name = 'CommandFailedError'
  readonly exitCode: number

  constructor(message: string, exitCode: number) {
    super(message)
    this.exitCode = exitCode
  }
}

export function signalNumber(signal: NodeJS.Signals): number {
  return constants.signals[signal] ?? 0
}

/**
 * Catches the forwarded signals for the whole command: one that arrives before the command
 * started stops it from starting (`beforeStart`), later ones are passed on to it.
 */
export class SignalRelay {
  /** The last signal received, if any. */
  received: NodeJS.Signals | undefined
  #started = false
  #child: ChildProcess | undefined
  #stop: (() => void) | undefined
  readonly #handler = (signal: NodeJS.Signals): void => {
    const first = this.received === undefined
    this.received = signal
    if (this.#started) {
      // The child may have exited already; kill() then fails quietly.
      this.#child?.kill(signal)
      return
    }
    // Said at once: taking the lock may still take a while (a store that is slow to answer).
    if (first) process.stderr.write(`shedlock run: ${signal} before the command started: the command will not be run\n`)
    this.#stop?.()
  }

  constructor() {
    for (const signal of FORWARDED) process.on(signal, this.#handler)
  }

  /** Calls `stop` on a signal that arrives before the command starts; at once if one already has. */
  beforeStart(stop: () => void): void {
    this.#stop = stop
    if (this.received !== undefined && !this.#started) stop()
  }

  /**
   * Runs the command with inherited stdio; resolves to 0 when it exits 0, rejects with a
   * {@link CommandFailedError} holding the exit code shedlock should have otherwise.
   */
  run(file: string, args: readonly string[], fencingToken: bigint | undefined): Promise<0> {
    // beforeStart's stop keeps the task from starting; this is the last guard.
    if (this.received !== undefined)
      return Promise.reject(
        new CommandFailedError(`${file}: not started: ${this.received} came first`, 128 + signalNumber(this.received)),
      )
    this.#started = true
    return new Promise((resolve, reject) => {
      let settled = false
      const done = (code: number, why: string): void => {
        if (settled) return
        settled = true
        this.#child = undefined
        if (code === 0) resolve(0)
        else reject(new CommandFailedError(`${file}: ${why}`, code))
      }
      const child = spawn(file, args, { stdio: 'inherit', env: commandEnvironment(process.env, fencingToken) })
      this.#child = child
      child.on('error', (error: NodeJS.ErrnoException) => {
        // As shells report them: 127 not found, 126 found but not executable.
        const code = error.code === 'ENOENT' ? 127 : error.code === 'EACCES' ? 126 : 1
        const why = code === 127 ? 'command not found' : code === 126 ? 'permission denied' : error.message
        process.stderr.write(`shedlock run: ${file}: ${why}\n`)
        done(code, `${why} (exit ${code})`)
      })
      child.on('exit', (code, signal) => {
        if (code !== null) return done(code, `exited with code ${code}`)
        const killedBy = signal ?? 'SIGKILL'
        const exit = 128 + signalNumber(killedBy)
        done(exit, `killed by ${killedBy} (exit ${exit})`)
      })
    })
  }

  stop(): void {
    for (const signal of FORWARDED) process.off(signal, this.#handler)
  }
}
