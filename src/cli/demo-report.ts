import type { Outcome, TickReport } from './demo-protocol.ts'

// What `shedlock demo` makes of the workers' reports: a line per tick while it runs, then the
// summary, whose checks (no tick ran twice, no two runs overlapped) are the point of the demo.

/** The ticks of a run, in epoch seconds, both included. */
export interface TickSpan {
  firstTick: number
  lastTick: number
}

/**
 * Prints the tick lines in order, each as soon as every node reported it (or it is long
 * overdue); with `final`, the rest. `reports` is read at each call, as the workers add to it.
 */
export function tickPrinter(
  out: (line?: string) => void,
  reports: readonly TickReport[],
  names: readonly string[],
): (span: TickSpan | undefined, final: boolean) => void {
  let nextTick = 0
  return (span, final) => {
    if (!span) return
    if (nextTick === 0) nextTick = span.firstTick
    for (; nextTick <= span.lastTick; nextTick++) {
      const forTick = reports.filter((r) => r.tick === nextTick)
      const overdue = Date.now() > (nextTick + 1) * 1000 + 6_000
      if (forTick.length < names.length && !final && !overdue) return
      if (forTick.length === 0 && final && nextTick * 1000 > Date.now()) return
      out(tickLine(nextTick, forTick, names))
      for (const r of forTick) if (r.outcome === 'error') out(`          ${r.node}: ${r.error ?? 'failed'}`)
    }
  }
}

/** `06:12:01  node-2 ran   node-1 skipped   node-3 skipped`, in local time. */
function tickLine(tick: number, reports: TickReport[], names: readonly string[]): string {
  const order: Record<Outcome, number> = { ran: 0, error: 1, skipped: 2 }
  const sorted = [...reports].sort(
    (a, b) => order[a.outcome] - order[b.outcome] || names.indexOf(a.node) - names.indexOf(b.node),
  )
  const parts = sorted.map((r) => `${r.node} ${r.outcome}`)
  for (const node of names) if (!reports.some((r) => r.node === node)) parts.push(`${node} no report`)
  const ran = reports.filter((r) => r.outcome === 'ran').length
  const flag = ran > 1 ? `   <- DUPLICATE: ran ${ran} times` : ran === 0 ? '   <- missed: no node ran it' : ''
  return `${clockTime(tick)}  ${parts.join('   ')}${flag}`
}

function clockTime(tick: number): string {
  const d = new Date(tick * 1000)
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':')
}

/** The demo's verdict, from the workers' reports. */
export interface Summary {
  ticks: number
  executions: number
  /** Executions that were a tick's second (or later) run, or that overlapped an earlier one in time; each counted once. */
  duplicates: number
  ranTwice: number
  overlaps: number
  skips: number
  missed: number
  errors: number
}

/** The verdict on the reports of the ticks in `span`; `otherErrors` are the failures no tick reported. */
export function summarize(all: readonly TickReport[], span: TickSpan | undefined, otherErrors: number): Summary {
  const reports = span ? all.filter((r) => r.tick >= span.firstTick && r.tick <= span.lastTick) : []
  const runs = reports.filter((r) => r.outcome === 'ran').sort((a, b) => (a.startedAt ?? 0) - (b.startedAt ?? 0))
  const seenTicks = new Set<number>()
  let duplicates = 0
  let ranTwice = 0
  let overlaps = 0
  let latestEnd = Number.NEGATIVE_INFINITY
  for (const run of runs) {
    const again = seenTicks.has(run.tick)
    const overlapping = (run.startedAt ?? 0) < latestEnd
    if (again) ranTwice++
    if (overlapping) overlaps++
    if (again || overlapping) duplicates++
    seenTicks.add(run.tick)
    latestEnd = Math.max(latestEnd, run.endedAt ?? 0)
  }
  const ticks = span ? Math.max(0, span.lastTick - span.firstTick + 1) : 0
  let missed = 0
  if (span) for (let tick = span.firstTick; tick <= span.lastTick; tick++) if (!seenTicks.has(tick)) missed++
  return {
    ticks,
    executions: runs.length,
    duplicates,
    ranTwice,
    overlaps,
    skips: reports.filter((r) => r.outcome === 'skipped').length,
    missed,
    errors: reports.filter((r) => r.outcome === 'error').length + otherErrors,
  }
}

/** Prints the summary, then the failures that are no tick's (a node that did not start, or was killed). */
export function printSummary(
  out: (line?: string) => void,
  summary: Summary,
  dbPath: string,
  failures: readonly string[],
): void {
  out()
  out('Summary')
  const row = (label: string, value: string | number, note = ''): void =>
    out(`${label.padStart(14)}: ${value}${note ? `   ${note}` : ''}`)
  row('ticks', summary.ticks)
  row('executions', summary.executions)
  row(
    'duplicates',
    summary.duplicates,
    summary.duplicates > 0
      ? `(${summary.ranTwice} extra runs of a tick, ${summary.overlaps} runs overlapping another in time)`
      : '',
  )
  row('skips', summary.skips)
  row('missed ticks', summary.missed, summary.missed > 0 ? '(no node ran them)' : '')
  row('errors', summary.errors)
  row('db', dbPath)
  for (const failure of failures) out(`  ${failure}`)
  out()
}
