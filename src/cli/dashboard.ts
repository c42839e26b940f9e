import { parseArgs } from 'node:util'
import { authFromEnv } from '../dashboard/auth.ts'
import { maxAgeOfStale } from '../dashboard/handler.ts'
import { startDashboard } from '../dashboard/server.ts'
import { type DashboardWindow, WINDOWS, windowOf } from '../dashboard/window.ts'
import { type Command, durationOption, EXIT_INTERRUPTED, EXIT_OK, integerOption, UsageError } from './command.ts'
import { DashboardStores } from './dashboard-stores.ts'
import { parseStoreUrl, storeUrlOption, URL_HELP } from './store-url.ts'
import { DEFAULT_OVERDUE_GRACE } from '../status/verdict.ts'

const HELP = `Usage: shedlock dashboard [--url URL]... [--table NAME] [--runs-table T]
                          [--port N] [--host ADDR] [--stale [NAME=]AGE]...
                          [--grace D] [--public-url URL]... [--allow-release]
                          [--allow-pause] [--allow-trigger] [--refresh S]
                          [--window W]

Serves a web page of the store's locks and tasks, until Ctrl-C: every task's
lock (held by whom, since, until), last run, last success, last failure and
failures in a row, STALE when it has not succeeded within its --stale age,
OVERDUE when its next fire time passed by more than --grace with no run;
a timeline per task, one lane per host (runs ok, failed or lock lost, slots
skipped, folded or caught up), over a window fitted to the tasks' period or
the last hour, day or week; every lock, held or expired, slot records apart.
Give --url several times for several stores on one page: a store that cannot
be reached is shown as an error, and tried again every 30 s. It also answers
GET /healthz with JSON: HTTP 200, or 503 when a task is stale, overdue or
failing (the verdict of "shedlock status") or a store cannot be read.

It listens on 127.0.0.1 and is read-only by default. Any other --host needs
authentication, from the environment: SHEDLOCK_DASHBOARD_USER and
SHEDLOCK_DASHBOARD_PASSWORD (basic auth) or SHEDLOCK_DASHBOARD_TOKEN (bearer).
It answers only requests for the address it listens on (127.0.0.1:PORT, and
localhost, [::1] or 0.0.0.0 at PORT over loopback; the address a client
reached on 0.0.0.0) and for each --public-url: any other Host is refused
(421), as a DNS rebinding attack would be. A release form's token is good
once, for 5 minutes.

Options:
${URL_HELP}
  --runs-table T   the run history's table (default: shedlock_runs)
  --port N         the port (default: 7070; 0 picks a free one)
  --host ADDR      the address to listen on (default: 127.0.0.1)
  --public-url URL an address people open it at besides that one: a DNS
                   name or a reverse proxy's URL, e.g.
                   https://ops.example.com/shedlock/ (repeatable)
  --stale S        [NAME=]AGE, as in "shedlock status": a task that has not
                   succeeded within AGE is stale
  --grace D        how late past its next fire time a task is overdue, as in
                   "shedlock status" (default: 1m)
  --allow-release  a Release button per held lock, with a confirmation; each
                   release prints an audit line (who, when, which lock)
  --allow-pause    Pause and Resume buttons per task lock, as "shedlock pause"
                   and "shedlock resume" (a running task cannot be paused),
                   with a confirmation and an audit line each
  --allow-trigger  a Run now button per task lock, as "shedlock trigger" (a
                   replica whose executor polls for triggers runs it)
  --refresh S      seconds between live refreshes of the page (default: 5;
                   0 for none)
  --window W       the timeline's window: auto (default: about the last 40
                   runs of the busiest task, 1 hour to 1 day), hour, day or
                   week
  -h, --help       show this help

Exit codes: 0 stopped by Ctrl-C or SIGTERM, 1 the port is taken, 2 usage
            error
`

/** `shedlock dashboard`. */
export const dashboardCommand: Command = {
  name: 'dashboard',
  summary: 'serve a web page of locks, tasks, runs and /healthz',
  help: HELP,
  async run(args) {
    let values: {
      url?: string[]
      table?: string
      'runs-table'?: string
      port?: string
      host?: string
      'public-url'?: string[]
      stale?: string[]
      grace?: string
      'allow-release'?: boolean
      'allow-pause'?: boolean
      'allow-trigger'?: boolean
      refresh?: string
      window?: string
    }
    try {
      ;({ values } = parseArgs({
        args,
        options: {
          url: { type: 'string', multiple: true },
          table: { type: 'string' },
          'runs-table': { type: 'string' },
          port: { type: 'string' },
          host: { type: 'string' },
          'public-url': { type: 'string', multiple: true },
          stale: { type: 'string', multiple: true },
          grace: { type: 'string' },
          'allow-release': { type: 'boolean' },
          'allow-pause': { type: 'boolean' },
          'allow-trigger': { type: 'boolean' },
          refresh: { type: 'string' },
          window: { type: 'string' },
        },
        strict: true,
        allowPositionals: false,
      }))
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message.split('\n')[0]!.replace(/\.$/, '') : String(error))
    }
    const port = integerOption({ port: values.port }, 'port', 7070, 0, 65_535)
    const refreshSeconds = integerOption({ refresh: values.refresh }, 'refresh', 5, 0, 3600)
    const maxAge = maxAgeOfStale(values.stale ?? [])
    const overdueGrace = durationOption('--grace', values.grace ?? DEFAULT_OVERDUE_GRACE, {
      hint: 'a duration like 1m or 90s',
    })
    const window: DashboardWindow | undefined = windowOf(values.window ?? 'auto')
    if (window === undefined)
      throw new UsageError(`--window ${JSON.stringify(values.window)} is not one of ${WINDOWS.join(', ')}`)
    const publicUrl = values['public-url'] ?? []
    for (const given of publicUrl) {
      if (!/^https?:\/\/[^/\s]/i.test(given) || !URL.canParse(given))
        throw new UsageError(
          `--public-url ${JSON.stringify(given)} is not an http(s) URL, e.g. https://ops.example.com/shedlock/`,
        )
    }
    const urls = values.url && values.url.length > 0 ? values.url.map(parseStoreUrl) : [storeUrlOption({})]
    const opened = await DashboardStores.open(urls, { table: values.table, runsTable: values['runs-table'] }, (line) =>
      process.stderr.write(`${line}\n`),
    )
    try {
      const dashboard = await startDashboard({
        stores: opened.stores,
        maxAge,
        overdueGrace,
        auth: authFromEnv(),
        publicUrl,
        allowRelease: values['allow-release'] === true,
        allowPause: values['allow-pause'] === true,
        allowTrigger: values['allow-trigger'] === true,
        audit: (line) => process.stderr.write(`${line}\n`),
        refreshSeconds,
        window,
        port,
        host: values.host ?? '127.0.0.1',
      })
      process.stdout.write(
        `shedlock dashboard on ${dashboard.url} (${urls.length} store${urls.length === 1 ? '' : 's'}${opened.unreachable > 0 ? `, ${opened.unreachable} unreachable` : ''}, ${modeOf(values['allow-release'] === true, values['allow-pause'] === true, values['allow-trigger'] === true)}); health: ${dashboard.url}healthz; Ctrl-C stops it\n`,
      )
      const signal = await new Promise<NodeJS.Signals>((resolve) => {
        process.once('SIGINT', () => resolve('SIGINT'))
        process.once('SIGTERM', () => resolve('SIGTERM'))
      })
      await dashboard.close()
      return signal === 'SIGINT' ? EXIT_INTERRUPTED : EXIT_OK
    } finally {
      await opened.close()
    }
  },
}

/** The startup line's word for what the page may change. */
function modeOf(release: boolean, pause: boolean, trigger: boolean): string {
  const allowed = [
    ...(release ? ['releases'] : []),
    ...(pause ? ['pauses', 'resumes'] : []),
    ...(trigger ? ['triggers'] : []),
  ]
  if (allowed.length === 0) return 'read-only'
  const last = allowed.pop()
  return `${allowed.length > 0 ? `${allowed.join(', ')} and ${last}` : last} allowed`
}
