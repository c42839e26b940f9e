import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { D1LockDatabase } from '../../src/providers/cloudflare-d1/index.ts'

// Miniflare (npm `miniflare`, with Cloudflare's workerd binary) runs Workers and D1 locally. The
// parts the tests use are typed here, so that the tests compile whether or not it is installed.

/** The options of `new Miniflare()` that the tests pass. */
export interface MiniflareOptions extends MiniflareWorkerOptions {
  /** Several Workers (each its own isolate) in one workerd process, instead of the one described at the top level. */
  workers?: (MiniflareWorkerOptions & { name: string })[]
}

/** The options of one Worker. */
export interface MiniflareWorkerOptions {
  name?: string
  modulesRoot?: string
  modules?: boolean | { type: 'ESModule'; path: string; contents?: string }[]
  script?: string
  scriptPath?: string
  compatibilityDate?: string
  compatibilityFlags?: string[]
  d1Databases?: string[] | Record<string, string>
  d1Persist?: string | boolean
  durableObjects?: Record<string, string | { className: string; useSQLite?: boolean }>
  durableObjectsPersist?: string | boolean
  bindings?: Record<string, unknown>
  host?: string
  port?: number
}

/** A scheduled event handled by a Worker, as `Fetcher.scheduled()` resolves it. */
export interface ScheduledOutcome {
  outcome: string
  noRetry: boolean
}

/** A running Miniflare instance: one workerd process. */
export interface MiniflareInstance {
  ready: Promise<URL>
  /** The D1 binding `bindingName` of Worker `workerName` (the first Worker by default). */
  getD1Database(
    bindingName: string,
    workerName?: string,
  ): Promise<D1LockDatabase & { exec(query: string): Promise<unknown> }>
  getWorker(
    workerName?: string,
  ): Promise<{ scheduled(options?: { scheduledTime?: Date; cron?: string }): Promise<ScheduledOutcome> }>
  dispatchFetch(
    input: string,
    init?: { method?: string; body?: string; headers?: Record<string, string> },
  ): Promise<{ status: number; text(): Promise<string>; json(): Promise<unknown> }>
  dispose(): Promise<void>
}

/** The `miniflare` module, as far as the tests use it. */
export interface MiniflareModule {
  Miniflare: new (options: MiniflareOptions) => MiniflareInstance
}

/**
 * Loads `miniflare`: the package of this repository, or else the one installed under
 * `SHEDLOCK_MINIFLARE_DIR` (`npm install --prefix DIR miniflare@4.20260426.0`). Throws, saying
 * how to install it, when neither loads.
 */
export async function loadMiniflare(): Promise<MiniflareModule> {
  const specifier = 'miniflare'
  try {
    return (await import(/* @vite-ignore */ specifier)) as MiniflareModule
  } catch (error) {
    const dir = process.env.SHEDLOCK_MINIFLARE_DIR
    if (!dir)
      throw new Error(
        `miniflare is not installed (${error instanceof Error ? error.message : String(error)}); npm install it, or set SHEDLOCK_MINIFLARE_DIR to a directory where npm install --prefix DIR miniflare@4.20260426.0 put it`,
        { cause: error },
      )
    return (await import(
      /* @vite-ignore */ pathToFileURL(join(dir, 'node_modules', 'miniflare', 'dist', 'src', 'index.js')).href
    )) as MiniflareModule
  }
}
