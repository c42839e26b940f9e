import { formatDuration } from '../core/duration.ts'
import type { LockRecord } from '../core/lock-inspector.ts'
import { type RunRecord, withLockState } from '../core/run-ledger.ts'
import { redact } from '../core/redact.ts'
import { messageOf } from '../core/task.ts'
import { escapeHtml, timeHtml } from './escape.ts'
import { markOf } from './marks.ts'
import { lockCell, outcomeBadge, type PageInput, query } from './page.ts'
import { type DashboardStore, maskRun } from './snapshot.ts'

// The page of one task (`?task=NAME&store=I`): its latest runs, filtered by outcome, node and
// text, counted by outcome, their durations over time, and why each skipped fire was skipped.

/** How many of a task's latest runs the page reads: the filters and counts are over these. */
export const TASK_PAGE_RUNS = 500
// How many of the runs that pass the filters the table lists, and the chart draws.
const LISTED = 200
const CHARTED = 100
const OUTCOME_ORDER = ['ok', 'failed', 'running', 'abandoned', 'skipped']

/** A task page's address, read from the page's query: which task of which store, and the filters. */
export interface TaskQuery {
  readonly store: number
  readonly name: string
  /** An outcome (`ok`, `failed`, `skipped`, `running`, `abandoned`), or '' for all. */
  readonly outcome: string
  /** A node as the runs name it, or '' for all. */
  readonly node: string
  /** A case-insensitive substring of the slot, node, outcome, error or skip reason; '' for all. */
  readonly text: string
}

/** The task page's query, when the address names a task (`?task=`). */
export function taskQueryOf(params: URLSearchParams): TaskQuery | undefined {
  const name = params.get('task')
  if (name === null || name === '') return undefined
  const store = Number(params.get('store') ?? '0')
  const field = (key: string): string => (params.get(key) ?? '').slice(0, 200)
  return {
    store: Number.isInteger(store) && store >= 0 ? store : -1,
    name,
    outcome: field('outcome'),
    node: field('node'),
    text: field('text').trim(),
  }
}

/** What the task page shows, as read from its store. */
export interface TaskView {
  readonly label: string
  readonly lock: LockRecord | undefined
  /** The latest runs read (at most {@link TASK_PAGE_RUNS}), newest first, masked. */
  readonly runs: readonly RunRecord[]
  /** What could not be read, one line each. */
  readonly errors: readonly string[]
}

/** Reads task `name`'s lock and latest runs from `store`; a failed read is in `errors`. */
export async function readTask(store: DashboardStore, name: string): Promise<TaskView> {
  const errors: string[] = []
  const lock = await store.inspector.get(name).catch((error: unknown) => {
    errors.push(`locks: ${redact(messageOf(error))}`)
    return undefined
  })
  let runs: RunRecord[] = []
  if (!store.runLedger) errors.push('runs: this store keeps no run history')
  else
    try {
      // A run still `running` whose lock its node no longer holds is read as abandoned.
      runs = withLockState(await store.runLedger.history(name, { limit: TASK_PAGE_RUNS }), lock).map(maskRun)
    } catch (error) {
      errors.push(`runs: ${redact(messageOf(error))}`)
    }
  return { label: redact(store.label), lock, runs, errors }
}

/** The runs of `runs` that pass the query's filters, newest first. */
export function filterRuns(runs: readonly RunRecord[], q: TaskQuery): RunRecord[] {
  const text = q.text.toLowerCase()
  return runs.filter(
    (run) =>
      (q.outcome === '' || run.outcome === q.outcome) &&
      (q.node === '' || run.node === q.node) &&
      (text === '' || searchText(run, runs).includes(text)),
  )
}

function searchText(run: RunRecord, runs: readonly RunRecord[]): string {
  const error = run.error ? `${run.error.type}: ${run.error.message}` : ''
  return `${run.slot?.toISOString() ?? ''} ${run.node} ${run.outcome} ${error} ${markOf(run, runs).why}`.toLowerCase()
}

/** The task's next fire time as its latest run recorded it (what makes it overdue once passed), or nothing. */
function nextFireText(latest: RunRecord | undefined): string {
  if (!latest?.nextFireAt) return ''
  return `<p id="next-fire">Next fire: ${timeHtml(latest.nextFireAt)} <span class="muted">(as its latest run recorded it)</span></p>`
}

/** The content of `<main>` for the task page. */
export function renderTaskMain(input: PageInput, q: TaskQuery, view: TaskView): string {
  const shown = filterRuns(view.runs, q)
  const back = query({ window: input.window, q: input.filter })
  return `<p><a href="${back}">← All tasks</a></p>
<h2>Task “${escapeHtml(q.name)}” <span class="muted">in ${escapeHtml(view.label)}</span></h2>
${view.errors.map((error) => `<div class="error" role="alert"><p>${escapeHtml(error)}</p></div>`).join('\n')}
<p>Lock: ${lockCell(view.lock)}</p>
${nextFireText(view.runs[0])}
<p id="counts">${countsText(view.runs)}</p>
${filterForm(input, q, view.runs)}
${durationChart(shown)}
${runTable(shown, view.runs, q)}`
}

function countsText(runs: readonly RunRecord[]): string {
  if (runs.length === 0) return 'No runs recorded.'
  const by = new Map<string, number>()
  for (const run of runs) by.set(run.outcome, (by.get(run.outcome) ?? 0) + 1)
  const order = (outcome: string): number => {
    const at = OUTCOME_ORDER.indexOf(outcome)
    return at < 0 ? OUTCOME_ORDER.length : at
  }
  const parts = [...by]
    .sort(([a], [b]) => order(a) - order(b))
    .map(([outcome, n]) => `<span class="badge o-${outcome}">${n} ${outcome}</span>`)
  return `${runs.length === 1 ? 'The latest run' : `The latest ${runs.length} runs`}: ${parts.join(' ')}`
}

function filterForm(input: PageInput, q: TaskQuery, runs: readonly RunRecord[]): string {
  const options = (values: Iterable<string>, chosen: string): string =>
    ['', ...new Set(values)]
      .map(
        (v) =>
          `<option value="${escapeHtml(v)}"${v === chosen ? ' selected' : ''}>${v === '' ? 'all' : escapeHtml(v)}</option>`,
      )
      .join('')
  const hidden = (name: string, value: string): string =>
    `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`
  return `<form method="get" class="filter" role="search">${hidden('task', q.name)}${hidden('store', String(q.store))}${hidden('window', input.window)}
<label for="f-outcome">Outcome</label> <select id="f-outcome" name="outcome">${options(
    runs.map((run) => run.outcome),
    q.outcome,
  )}</select>
<label for="f-node">Node</label> <select id="f-node" name="node">${options(
    runs.map((run) => run.node),
    q.node,
  )}</select>
<label for="f-text">Search</label> <input id="f-text" name="text" type="search" value="${escapeHtml(q.text)}" placeholder="slot, error, holder">
<button type="submit">Filter</button></form>`
}

/** Bars of the durations of the latest runs that have one, oldest left, as an SVG. */
function durationChart(runs: readonly RunRecord[]): string {
  const timed = runs
    .filter((run) => run.durationMs !== undefined)
    .slice(0, CHARTED)
    .reverse()
  if (timed.length === 0) return ''
  const max = Math.max(1, ...timed.map((run) => run.durationMs!))
  const width = 600
  const height = 120
  // Room for 40 bars at least, the newest at the right edge: a few runs are not a wall of colour.
  const step = width / Math.max(timed.length, 40)
  const left = width - timed.length * step
  const bars = timed
    .map((run, i) => {
      const h = Math.max(1, Math.round((run.durationMs! / max) * (height - 4)))
      return `<rect class="bar o-${run.outcome}" x="${(left + i * step).toFixed(1)}" y="${height - h}" width="${Math.max(1, step - 1).toFixed(1)}" height="${h}"><title>${escapeHtml(`${run.startedAt.toISOString()} ${run.outcome}, ${runDuration(run.durationMs!)}`)}</title></rect>`
    })
    .join('')
  const sorted = timed.map((run) => run.durationMs!).sort((a, b) => a - b)
  const median = sorted[Math.floor(sorted.length / 2)]!
  const summary = `Durations of the latest ${timed.length === 1 ? 'run' : `${timed.length} runs`}: median ${runDuration(median)}, longest ${runDuration(max)}`
  return `<h3>Durations</h3>
<svg class="durations" viewBox="0 0 ${width} ${height}" preserveAspectRatio="none" role="img" aria-label="${escapeHtml(summary)}">${bars}</svg>
<p class="muted">${escapeHtml(summary)}; oldest left.</p>`
}

function runTable(shown: readonly RunRecord[], runs: readonly RunRecord[], q: TaskQuery): string {
  const filtered = q.outcome !== '' || q.node !== '' || q.text !== ''
  const heading = `<h3>Runs <span class="muted">(${shown.length}${filtered ? ` of ${runs.length}, filtered` : ''}${shown.length > LISTED ? `, the latest ${LISTED} listed` : ''})</span></h3>`
  if (shown.length === 0) return `${heading}<p class="muted">None.</p>`
  const rows = shown.slice(0, LISTED).map((run) => {
    const why = run.outcome === 'ok' || run.outcome === 'failed' ? '' : markOf(run, runs).why
    const error = run.error
      ? `<span class="err">${escapeHtml(run.error.type)}: ${escapeHtml(run.error.message)}</span>`
      : ''
    return `<tr data-outcome="${run.outcome}"><td data-label="Started">${timeHtml(run.startedAt)}</td><td data-label="Slot">${timeHtml(run.slot)}</td>
<td data-label="Node">${escapeHtml(run.node)}</td><td data-label="Outcome">${outcomeBadge(run)}${why ? `<br><span class="muted why">${escapeHtml(why)}</span>` : ''}</td>
<td class="num" data-label="Duration">${run.durationMs === undefined ? '-' : escapeHtml(runDuration(run.durationMs))}</td><td data-label="Error">${error || '<span class="muted">-</span>'}</td></tr>`
  })
  return `${heading}
<table class="runs"><caption class="visually-hidden">Runs of ${escapeHtml(q.name)}</caption>
<thead><tr><th scope="col">Started</th><th scope="col">Slot</th><th scope="col">Node</th><th scope="col">Outcome</th><th scope="col">Duration</th><th scope="col">Error</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`
}

// As the main page: 250 ms, 1.5 s; longer ones as durations are written (2m30s, 1h).
function runDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`
  return formatDuration(Math.round(ms / 1000) * 1000)
}
