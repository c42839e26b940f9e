import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Plugin } from 'vite'
import type { ReportedHookContext, Reporter, TestCase, TestModule, TestSpecification, Vitest } from 'vitest/node'

// A hung test file must fail the run fast and say where it hung. vitest's testTimeout does not
// cover it: a worker that went idle between files (no socket, no timer, no child), a test that
// blocks its worker's event loop, a hook or an import that never ends, a teardown that never
// ends: each once stalled a CI run until it was killed by hand (7 and 16 minutes). This watchdog
// runs in vitest's main process, not in the workers, so a stuck worker cannot stop it.

/** Limits of {@link watchdog}, in seconds. */
export interface WatchdogOptions {
  /** Longest one test file may take, from its import to its last hook. */
  fileSeconds: number
  /**
   * Longest a worker may stay free while test files wait to start (a worker that never took
   * the next file). @default 180
   */
  idleSeconds?: number
  /** Longest vitest may take to exit after the last file ended (globalSetup teardown, workers). @default 120 */
  exitSeconds?: number
  /** How often the watchdog looks, in milliseconds. @default 2000 */
  checkMs?: number
}

/**
 * A vitest plugin that adds the watchdog's reporter to a `vitest run`, whatever reporters the
 * command line chose. Past a limit it prints `hung: <file> > <test> for N s`, the state of every
 * other running file, appends the same lines to `$SHEDLOCK_WATCHDOG_LOG` when set (.ci/run lists
 * them at its end), kills vitest's workers and what they started, and exits 1.
 * `SHEDLOCK_WATCHDOG=off` turns it off (a debugger paused on a breakpoint looks hung).
 */
export function watchdog(options: WatchdogOptions): Plugin {
  const off = process.env.SHEDLOCK_WATCHDOG === 'off'
  return {
    name: 'shedlock-watchdog',
    config: () => (off ? {} : { test: { setupFiles: [WORKER_SETUP] } }),
    configureVitest({ vitest }) {
      if (vitest.config.watch || off) return
      // The workers inherit it: where each writes the test it is in (watchdog-worker.ts).
      const dir = mkdtempSync(join(tmpdir(), 'shedlock-watchdog-'))
      process.env.SHEDLOCK_WATCHDOG_DIR = dir
      process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
      vitest.config.reporters.push(new Watchdog(options, dir))
    },
  }
}

const WORKER_SETUP = new URL('./watchdog-worker.ts', import.meta.url).pathname

/** What one running file is doing, as the workers last reported it. */
interface Running {
  readonly file: string
  readonly since: number
  test?: { name: string; since: number }
  hook?: { name: string; since: number }
  lastDone?: string
}

class Watchdog implements Reporter {
  readonly #fileMs: number
  readonly #idleMs: number
  readonly #exitMs: number
  readonly #checkMs: number
  #vitest: Vitest | undefined
  #timer: NodeJS.Timeout | undefined
  readonly #running = new Map<string, Running>()
  readonly #waiting = new Map<string, string>()
  #lastChange = Date.now()
  #endedAt: number | undefined
  readonly #dir: string

  constructor(options: WatchdogOptions, dir: string) {
    this.#dir = dir
    this.#fileMs = options.fileSeconds * 1000
    this.#idleMs = (options.idleSeconds ?? 180) * 1000
    this.#exitMs = (options.exitSeconds ?? 120) * 1000
    this.#checkMs = options.checkMs ?? 2000
  }

  onInit(vitest: Vitest): void {
    this.#vitest = vitest
    // unref(): it still fires while anything else keeps the process alive (a hung run does),
    // and never holds a finished one open.
    this.#timer = setInterval(() => this.#check(), this.#checkMs).unref()
  }

  onTestRunStart(specifications: ReadonlyArray<TestSpecification>): void {
    for (const s of specifications) this.#waiting.set(s.moduleId, this.#relative(s.moduleId))
    this.#lastChange = Date.now()
    this.#endedAt = undefined
  }

  // Queued: the worker is about to import the file; its import counts towards its time.
  onTestModuleQueued(module: TestModule): void {
    this.#waiting.delete(module.moduleId)
    this.#running.set(module.moduleId, { file: this.#relative(module.moduleId), since: Date.now() })
    this.#lastChange = Date.now()
  }

  onTestModuleEnd(module: TestModule): void {
    this.#waiting.delete(module.moduleId)
    this.#running.delete(module.moduleId)
    this.#lastChange = Date.now()
  }

  onTestCaseReady(test: TestCase): void {
    const running = this.#running.get(test.module.moduleId)
    if (running) running.test = { name: test.fullName, since: Date.now() }
  }

  onTestCaseResult(test: TestCase): void {
    const running = this.#running.get(test.module.moduleId)
    if (!running) return
    running.test = undefined
    running.lastDone = test.fullName
  }

  onHookStart(hook: ReportedHookContext): void {
    const running = this.#running.get(moduleOf(hook).moduleId)
    if (!running) return
    const where = hook.entity.type === 'module' ? '' : ` of ${hook.entity.fullName}`
    running.hook = { name: `${hook.name}${where}`, since: Date.now() }
  }

  onHookEnd(hook: ReportedHookContext): void {
    const running = this.#running.get(moduleOf(hook).moduleId)
    if (running) running.hook = undefined
  }

  onTestRunEnd(): void {
    rmSync(this.#dir, { recursive: true, force: true })
    this.#running.clear()
    this.#waiting.clear()
    this.#endedAt = Date.now()
  }

  #check(): void {
    const now = Date.now()
    if (this.#endedAt !== undefined) {
      const ms = now - this.#endedAt
      if (ms > this.#exitMs) {
        this.#fire([
          `hung: every test file ended ${seconds(ms)} s ago, but vitest has not exited (a globalSetup teardown, or a worker that does not end; limit ${seconds(this.#exitMs)} s)`,
        ])
      }
      return
    }
    for (const running of this.#running.values()) {
      const ms = now - running.since
      if (ms > this.#fileMs) {
        this.#readWorkers()
        this.#fire([
          `hung: ${describe(running, now)}; the file has run for ${seconds(ms)} s (limit ${seconds(this.#fileMs)} s)`,
          ...this.#others(running, now),
        ])
        return
      }
    }
    const maxWorkers = this.#vitest?.config.maxWorkers ?? 1
    const idleMs = now - this.#lastChange
    if (this.#waiting.size > 0 && this.#running.size < maxWorkers && idleMs > this.#idleMs) {
      this.#readWorkers()
      const waiting = [...this.#waiting.values()]
      this.#fire([
        `hung: ${waiting.length} test file(s) never started (${waiting.slice(0, 5).join(', ')}${waiting.length > 5 ? ', ...' : ''}), while ${maxWorkers - this.#running.size} of ${maxWorkers} workers were free for ${seconds(idleMs)} s (limit ${seconds(this.#idleMs)} s)`,
        ...this.#others(undefined, now),
      ])
    }
  }

  #others(except: Running | undefined, now: number): string[] {
    return [...this.#running.values()].filter((r) => r !== except).map((r) => `  also running: ${describe(r, now)}`)
  }

  #fire(lines: readonly string[]): void {
    clearInterval(this.#timer)
    rmSync(this.#dir, { recursive: true, force: true })
    const text = `${lines.join('\n')}\n`
    process.stderr.write(`\n${text}`)
    const log = process.env.SHEDLOCK_WATCHDOG_LOG
    if (log)
      appendFileSync(
        log,
        lines
          .filter((l) => l.startsWith('hung'))
          .map((l) => `watchdog: ${l}\n`)
          .join(''),
      )
    killDescendants(process.pid)
    process.exit(1)
  }

  // What the workers wrote: a test the main process was never told of (its worker blocked
  // before its batched report went out) is taken from there.
  #readWorkers(): void {
    let names: string[] = []
    try {
      names = readdirSync(this.#dir)
    } catch {}
    for (const name of names) {
      try {
        const state = JSON.parse(readFileSync(join(this.#dir, name), 'utf8')) as {
          file: string
          test?: string
          since?: number
        }
        const running = this.#running.get(state.file)
        if (running && !running.test && state.test)
          running.test = { name: state.test, since: state.since ?? Date.now() }
      } catch {}
    }
  }

  #relative(moduleId: string): string {
    const root = this.#vitest?.config.root
    return root && moduleId.startsWith(`${root}/`) ? moduleId.slice(root.length + 1) : moduleId
  }
}

function moduleOf(hook: ReportedHookContext): TestModule {
  return hook.entity.type === 'module' ? hook.entity : hook.entity.module
}

/** `<file> > <test> for N s`, or what the file was doing outside a test. */
function describe(running: Running, now: number): string {
  const { file, test, hook, lastDone } = running
  if (test) return `${file} > ${test.name} for ${seconds(now - test.since)} s${hook ? ` (in ${hook.name})` : ''}`
  if (hook) return `${file} > ${hook.name} for ${seconds(now - hook.since)} s`
  return lastDone
    ? `${file} > between tests, after ${lastDone}`
    : `${file} > before any test started (importing the file, collecting its tests, or a beforeAll)`
}

function seconds(ms: number): number {
  return Math.round(ms / 1000)
}

/**
 * SIGKILLs every process below `pid` (vitest's workers, the servers and nodes the tests started),
 * found through /proc; elsewhere than Linux, nothing (the stage's `timeout` in .ci/run remains).
 */
function killDescendants(pid: number): void {
  let entries: string[]
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e))
  } catch {
    return
  }
  const children = new Map<number, number[]>()
  for (const entry of entries) {
    try {
      // The parent is the second field after the command, which is in parentheses and may hold spaces.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)])
    } catch {}
  }
  const below = (p: number): number[] => (children.get(p) ?? []).flatMap((c) => [c, ...below(c)])
  for (const child of below(pid)) {
    try {
      process.kill(child, 'SIGKILL')
    } catch {}
  }
}
