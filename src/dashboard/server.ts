import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { LockConfigurationError } from '../core/errors.ts'
import { checkAuth, isLoopback } from './auth.ts'
import { createDashboard, type DashboardHandler, type DashboardOptions } from './handler.ts'

/** Options of {@link startDashboard}: the dashboard's, and where to listen. */
export interface StartDashboardOptions extends DashboardOptions {
  /** The port; 0 picks a free one. @default 7070 */
  port?: number
  /**
   * The address to listen on. Anything but a loopback address needs `auth`: a dashboard shows who
   * holds which lock, and the errors of failed runs. @default "127.0.0.1"
   */
  host?: string
}

/** A running dashboard. */
export interface RunningDashboard {
  readonly server: Server
  readonly handler: DashboardHandler
  /** The page's address, e.g. `http://127.0.0.1:7070/`. */
  readonly url: string
  /** Stops listening and closes open connections. */
  close(): Promise<void>
}

/**
 * Starts a `node:http` server with the dashboard (what `shedlock dashboard` runs).
 * @throws LockConfigurationError when `host` is not a loopback address and there is no `auth`.
 */
export async function startDashboard(options: StartDashboardOptions): Promise<RunningDashboard> {
  const host = options.host ?? '127.0.0.1'
  if (!isLoopback(host) && checkAuth(options.auth) === undefined) {
    throw new LockConfigurationError(
      `dashboard: listening on ${host} would show locks and run errors to anyone who can reach it; set a user and password (SHEDLOCK_DASHBOARD_USER, SHEDLOCK_DASHBOARD_PASSWORD) or a token (SHEDLOCK_DASHBOARD_TOKEN), or listen on 127.0.0.1`,
    )
  }
  const handler = createDashboard(options)
  const server = createServer((request, response) => void handler(request, response))
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 7070, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo
  const shown = host.includes(':') ? `[${host}]` : host
  return {
    server,
    handler,
    url: `http://${shown}:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
