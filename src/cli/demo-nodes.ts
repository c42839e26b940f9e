import { type ChildProcess, fork } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { SqliteDriverName } from '../providers/sqlite/driver.ts'
import { type ParentMessage, type TickReport, WORKER, type WorkerMessage } from './demo-protocol.ts'

// The worker processes of `shedlock demo`, as the parent sees them: started with fork(), told
// what to do over IPC, and never left behind as orphans.

/** How long a stopped worker gets before SIGKILL. */
const STOP_GRACE_MS = 3_000

/** One node: a worker process and what the parent knows of it. */
export interface Worker {
  readonly node: string
  readonly child: ChildProcess
  ready: boolean
  exited: boolean
}

/** What a node is started with. */
export interface WorkerOptions {
  readonly dbPath: string
  readonly driver: SqliteDriverName
  readonly useLock: boolean
}

/** Where a node's events go. */
export interface WorkerEvents {
  /** A tick report. */
  report(report: TickReport): void
  /** Something that went wrong outside a tick, as a line for the summary. */
  fail(failure: string): void
  /** True once the parent stops the nodes: an exit is then no failure. */
  stopping(): boolean
  /** After every event, the worker's state updated. */
  changed(): void
}

/** Forks the worker process of `node`. */
export function startWorker(node: string, options: WorkerOptions, events: WorkerEvents): Worker {
  const { dbPath, driver, useLock } = options
  const workerArgs = [WORKER, '--db', dbPath, '--node', node, '--driver', driver, ...(useLock ? [] : ['--no-lock'])]
  const child = fork(mainScript(), workerArgs, {
    // Not the parent's execArgv (an --inspect there would clash); node:sqlite warns that it is experimental on Node 22.
    execArgv: driver === 'node:sqlite' ? ['--disable-warning=ExperimentalWarning'] : [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const worker: Worker = { node, child, ready: false, exited: false }
  child.on('message', (message: WorkerMessage) => {
    if (message.type === 'ready') worker.ready = true
    else if (message.type === 'tick') events.report(message)
    else if (message.type === 'fatal') events.fail(`${node}: ${message.error}`)
    events.changed()
  })
  child.on('error', (error) => {
    events.fail(`${node}: ${error.message}`)
    if (child.pid === undefined) worker.exited = true
    events.changed()
  })
  child.on('exit', (code, signal) => {
    worker.exited = true
    if (!events.stopping() && code !== 0) events.fail(`${node} exited with ${signal ?? `code ${code}`}`)
    events.changed()
  })
  return worker
}

/** Asks every live worker to stop, and kills the ones still there after STOP_GRACE_MS: no orphans. Resolves to the killed ones. */
export async function stopWorkers(workers: Worker[]): Promise<Worker[]> {
  const live = (): Worker[] => workers.filter((w) => !w.exited)
  for (const w of live()) send(w.child, { type: 'stop' })
  const deadline = Date.now() + STOP_GRACE_MS
  while (live().length > 0 && Date.now() < deadline) await sleep(20)
  const killed = live()
  for (const w of killed) w.child.kill('SIGKILL')
  while (live().length > 0) await sleep(20)
  return killed
}

/** Tells a worker `message`, unless it is gone. */
export function send(child: ChildProcess, message: ParentMessage): void {
  if (!child.connected) return
  try {
    child.send(message, (error) => void error) // a worker that just exited cannot be told: nothing to do
  } catch {
    // same
  }
}

/** dist/cli/main.js (or src/cli/main.ts when run from source): the entry point the workers run. */
function mainScript(): string {
  const self = fileURLToPath(import.meta.url)
  return self.replace(/demo-nodes\.(ts|js)$/, 'main.$1')
}
