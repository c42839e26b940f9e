import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { type NodeProcess, startNode } from '../../helpers/processes.ts'

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url))

/** A message from worker.mjs: `{ type, ...fields }`. */
export interface WorkerMessage {
  type: string
  [field: string]: unknown
}

/** Unhandled rejections, uncaught exceptions and warnings a worker saw. */
export interface WorkerProblems {
  unhandledRejections: unknown[]
  uncaughtExceptions: unknown[]
  warnings: string[]
}

const live = new Set<WorkerProcess>()

/**
 * A worker.mjs child process (one node of the fault suite) with an IPC channel. Messages are
 * buffered, so `next()` never misses one sent before it was called. Its output is kept for
 * the assertions (secrets) and for failure messages.
 */
export class WorkerProcess {
  readonly child: ChildProcess
  readonly label: string
  readonly messages: WorkerMessage[] = []
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly #process: NodeProcess
  readonly #waiters = new Set<() => void>()

  private constructor(job: Record<string, unknown>, env: NodeJS.ProcessEnv) {
    this.label = `${String(job.mode)} worker${job.node === undefined ? '' : ` ${String(job.node)}`}`
    // --expose-gc: the soak samples the heap after a full collection.
    this.#process = startNode(['--expose-gc', WORKER, JSON.stringify(job)], { env, ipc: true })
    this.child = this.#process.child
    this.child.on('message', (message) => {
      this.messages.push(message as WorkerMessage)
      for (const wake of this.#waiters) wake()
    })
    this.exited = this.#process.exited.then((exit) => {
      live.delete(this)
      for (const wake of this.#waiters) wake()
      return exit
    })
    live.add(this)
  }

  /** What the worker printed so far. */
  get stdout(): string {
    return this.#process.stdout()
  }

  get stderr(): string {
    return this.#process.stderr()
  }

  /** Forks worker.mjs with `job`; `env` adds to this process's environment. */
  static start(job: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): WorkerProcess {
    return new WorkerProcess(job, env)
  }

  /** Kills every worker still running (afterEach/afterAll safety net). */
  static async killAll(): Promise<void> {
    await Promise.all([...live].map((w) => w.kill('SIGKILL')))
  }

  /**
   * The first buffered message of `type` (and matching `where`) not taken yet, removed from the
   * buffer, waiting up to `timeoutMs`. A `fatal` message or an exit of the worker rejects with what it said.
   */
  async next(
    type: string,
    timeoutMs: number,
    where: (message: WorkerMessage) => boolean = () => true,
  ): Promise<WorkerMessage> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const index = this.messages.findIndex((m) => m.type === type && where(m))
      if (index >= 0) return this.messages.splice(index, 1)[0]!
      const fatal = this.messages.find((m) => m.type === 'fatal')
      if (fatal) throw new Error(`${this.label} failed: ${JSON.stringify(fatal.error)}\nstderr:\n${this.stderr}`)
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(
          `${this.label} exited (${this.child.exitCode ?? this.child.signalCode}) before sending "${type}"\nstderr:\n${this.stderr}`,
        )
      }
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`${this.label} sent no "${type}" within ${timeoutMs}ms\nstderr:\n${this.stderr}`)
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer)
          this.#waiters.delete(wake)
          resolve()
        }
        const timer = setTimeout(wake, left)
        this.#waiters.add(wake)
      })
    }
  }

  send(message: unknown): void {
    this.child.send(message as never)
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal)
    await this.exited
  }
}
