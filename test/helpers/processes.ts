import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, connect as tcpConnect } from 'node:net'

/** A loopback port that was free a moment ago, for a server a test starts itself. */
export async function freePort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return port
}

/** True when something accepts connections on 127.0.0.1:`port` within `timeoutMs`. */
export function portOpen(port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect(port, '127.0.0.1')
    const done = (open: boolean): void => {
      socket.destroy()
      resolve(open)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => done(true))
  })
}

/** Polls `check` every 50 ms until it holds; false after `ms`. */
export async function waitFor(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return true
}

/** Stops a child process: SIGTERM, then SIGKILL after 10 s. Resolves once it exited. */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(timer)
}

/** How a process started by {@link startNode} ended. */
export interface ProcessExit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** What a process started by {@link startNode} left once its output pipes closed. */
export interface ProcessRun extends ProcessExit {
  stdout: string
  stderr: string
}

/** Options of {@link startNode}. */
export interface StartNodeOptions {
  /** Added to this process's environment; an `undefined` value removes a variable. */
  env?: Record<string, string | undefined>
  /** Working directory. @default this process's */
  cwd?: string
  /** An IPC channel (`child.send()`, `'message'` events), as `fork()` opens. @default false */
  ipc?: boolean
  /** SIGKILL after this many milliseconds. @default no limit */
  killAfterMs?: number
  /** A pipe to the process's stdin (`child.stdin`), instead of none. @default false */
  stdin?: boolean
}

/** A Node.js process a test started, with its output so far. */
export interface NodeProcess {
  readonly child: ChildProcess
  stdout(): string
  stderr(): string
  /** Resolves as soon as the process exits. */
  readonly exited: Promise<ProcessExit>
  /** Resolves when the output pipes close too, which a grandchild holding them delays. */
  readonly done: Promise<ProcessRun>
}

// One set per worker process, shared by every copy of this module (a worker that runs several
// files imports it afresh for each), and emptied when the worker exits: nothing a test started
// may outlive it.
const registry = Symbol.for('shedlock.test.startedProcesses')
const holder = globalThis as typeof globalThis & { [registry]?: Set<ChildProcess> }
const started: Set<ChildProcess> = holder[registry] ?? new Set()
if (!holder[registry]) {
  holder[registry] = started
  process.once('exit', () => killStartedProcesses())
}

/**
 * Starts `node ...args` (this process's Node: the Node line under test) with stdin closed and
 * output piped: the one way the suites start a node of their own, a CLI or an app. Every
 * process still running when the test file ends is killed (see {@link killStartedProcesses}).
 */
export function startNode(args: readonly string[], options: StartNodeOptions = {}): NodeProcess {
  const env: Record<string, string | undefined> = { ...process.env, ...options.env }
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key]
  const child = spawn(process.execPath, args, {
    stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe', ...(options.ipc ? (['ipc'] as const) : [])],
    env: env as NodeJS.ProcessEnv,
    ...(options.cwd ? { cwd: options.cwd } : {}),
  })
  started.add(child)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const timer =
    options.killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), options.killAfterMs)
  const exited = new Promise<ProcessExit>((resolve) =>
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      started.delete(child)
      resolve({ code, signal })
    }),
  )
  const done = new Promise<ProcessRun>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  )
  return { child, stdout: () => stdout, stderr: () => stderr, exited, done }
}

/** SIGKILLs every process {@link startNode} started that still runs: from afterAll or afterEach, so a failing test leaves none behind. */
export function killStartedProcesses(): void {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}
