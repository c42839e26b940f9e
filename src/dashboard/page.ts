import { formatDuration } from '../core/duration.ts'
import type { LockRecord } from '../core/lock-inspector.ts'
import { describePause, pauseOf } from '../core/pause.ts'
import type { RunRecord } from '../core/run-ledger.ts'
import { escapeHtml, timeHtml } from './escape.ts'
import { CSS, SCRIPT } from './page-assets.ts'
import type { StoreSnapshot, TaskView } from './snapshot.ts'
import { inWindow, KIND_LABELS, type MarkKind, markOf, timelineSvg } from './timeline.ts'
import { type DashboardWindow, WINDOWS, windowText } from './window.ts'

/** What the page is rendered from. */
export interface PageInput {
  readonly title: string
  readonly stores: readonly StoreSnapshot[]
  readonly window: DashboardWindow
  /** The timeline window's length in milliseconds (fitted, for `'auto'`). */
  readonly windowMs: number
  /**
   * The health endpoint, relative to the page's own address: `healthz` on a page whose path ends
   * in `/`, `./<last segment>/healthz` on one that does not (`/shedlock` gives `./shedlock/healthz`).
   */
  readonly healthHref: string
  /** The lock filter (`?q=`): a substring of the name or holder. */
  readonly filter: string
  /** The CSRF token of the action forms (release, pause, resume); `undefined` when the page is read-only. */
  readonly csrf: string | undefined
  /** Which actions the page offers: releases, and pauses and resumes per store (by index). */
  readonly actions?:
    | { readonly release: boolean; readonly pause: readonly boolean[]; readonly trigger?: readonly boolean[] }
    | undefined
  /** Seconds between live refreshes; 0 for none. */
  readonly refreshSeconds: number
  /** A per-response nonce for the inline style and script (the Content-Security-Policy allows nothing else). */
  readonly nonce: string
  /** A line shown on top, e.g. the outcome of a release. */
  readonly notice?: string | undefined
}

/**
 * The whole page, with `main` (by default the stores) in `<main>`. Readable without JavaScript;
 * the script only refreshes `<main>` and adds local times to tooltips.
 */
export function renderPage(input: PageInput, main: string = renderMain(input)): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(input.title)}</title>
<style nonce="${input.nonce}">${CSS}</style>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header>
<h1>${escapeHtml(input.title)}</h1>
<nav aria-label="Time window">Timeline window: ${WINDOWS.map((w) =>
    w === input.window
      ? `<strong aria-current="page">${w === 'auto' && input.stores.length > 0 ? `auto (${windowText(input.windowMs)})` : w}</strong>`
      : `<a href="${query({ window: w, q: input.filter })}">${w}</a>`,
  ).join(' · ')}</nav>
</header>
<main id="main" tabindex="-1" data-refresh="${input.refreshSeconds}">
${main}
</main>
<script nonce="${input.nonce}">${SCRIPT}</script>
</body>
</html>
`
}

/** The content of `<main>`: what a live refresh replaces. */
export function renderMain(input: PageInput): string {
  const tasks = input.stores.flatMap((store) => store.tasks ?? [])
  const stale = tasks.filter((t) => t.state === 'stale').length
  const overdue = tasks.filter((t) => t.state === 'overdue').length
  const failing = tasks.filter((t) => t.state === 'failing').length
  const held = input.stores.reduce((n, s) => n + s.locks.filter((l) => l.held).length, 0)
  const summary = `${input.stores.length} store${plural(input.stores.length)}, ${tasks.length} task${plural(tasks.length)}: ${stale} stale, ${overdue === 0 ? '' : `${overdue} overdue, `}${failing} failing; ${held} lock${plural(held)} held`
  return `${input.notice ? `<p class="notice" role="status">${escapeHtml(input.notice)}</p>` : ''}
<p id="summary" class="${stale + overdue + failing > 0 ? 'bad' : 'good'}">${escapeHtml(summary)}</p>
${input.stores.map((store, index) => renderStore(store, index, input)).join('\n')}
<footer>Times are the stores' (UTC); hover one for your local time. Updated ${timeHtml(new Date())}.${input.refreshSeconds > 0 ? ` Refreshes every ${input.refreshSeconds} s.` : ''} Health: <a href="${escapeHtml(input.healthHref)}">healthz</a> (JSON).</footer>`
}

function renderStore(store: StoreSnapshot, index: number, input: PageInput): string {
  const id = `store-${index}`
  return `<section class="store" aria-labelledby="${id}">
<h2 id="${id}">${escapeHtml(store.label)}</h2>
<p class="muted">Now ${timeHtml(store.now)} on ${escapeHtml(store.clock)}.</p>
${store.errors.map(errorHtml).join('\n')}
${renderTasks(store, id, index)}
${renderTimelines(store, id, input)}
${renderLocks(store, index, id, input)}
</section>`
}

/** A read that failed (`locks: ...`, `runs: ...`): its first line, then the rest of the store's advice (a CREATE TABLE...) as it is. */
function errorHtml(error: string): string {
  const [first, ...rest] = error.split('\n')
  return `<div class="error" role="alert"><p>${escapeHtml(first!)}</p>${rest.length > 0 ? `<pre>${escapeHtml(rest.join('\n'))}</pre>` : ''}</div>`
}

const DEFAULT_NO_HISTORY_NOTE = 'tasks and runs are shown for a store given a run ledger (the runLedger option).'

function renderTasks(store: StoreSnapshot, id: string, index: number): string {
  // A store that could not be read is its error panel, not a store without history.
  if (store.tasks === undefined && store.errors.length > 0) return ''
  if (store.tasks === undefined)
    return `<p class="muted">This store keeps no run history: ${escapeHtml(store.noHistoryNote ?? DEFAULT_NO_HISTORY_NOTE)}</p>`
  if (store.tasks.length === 0)
    return `<h3>Tasks</h3><p class="muted">No runs recorded yet. Executors record runs when given a run ledger (<code>runLedger</code> option, or <code>shedlock run</code>).</p>`
  const rows = store.tasks.map((task) => {
    const last = task.task.lastRun
    const failure = task.task.lastFailure
    return `<tr class="task state-${task.state}" data-task="${escapeHtml(task.task.name)}" data-state="${task.state}">
<th scope="row"><a href="${query({ task: task.task.name, store: String(index) })}">${escapeHtml(task.task.name)}</a> <a class="muted" href="#${id}-timeline-${slug(task.task.name)}" aria-label="Timeline of ${escapeHtml(task.task.name)}">timeline</a></th>
<td data-label="State">${stateBadge(task)}</td>
<td data-label="Lock">${lockCell(task.lock)}</td>
<td data-label="Last run">${last ? `${outcomeBadge(last)} ${timeHtml(last.startedAt)}<br><span class="muted">on ${escapeHtml(last.node)}${durationOf(last)}</span>${skippedWhy(last, task)}` : '<span class="muted">never</span>'}</td>
<td data-label="Last success">${task.task.lastSuccess ? `${timeHtml(task.task.lastSuccess.startedAt)}<span class="muted">${durationOf(task.task.lastSuccess)}</span>` : '<span class="muted">never</span>'}</td>
<td data-label="Last failure">${failure ? `${timeHtml(failure.startedAt)}<br>${failure.error ? `<span class="err">${escapeHtml(failure.error.type)}: ${escapeHtml(failure.error.message)}</span>` : escapeHtml(failure.outcome)}` : '<span class="muted">-</span>'}</td>
<td class="num" data-label="Failed in a row">${task.task.consecutiveFailures}</td>
</tr>`
  })
  return `<h3>Tasks</h3>
<table class="tasks"><caption class="visually-hidden">Tasks of ${escapeHtml(store.label)}</caption>
<thead><tr><th scope="col">Task</th><th scope="col">State (max age)</th><th scope="col">Lock</th><th scope="col">Last run</th><th scope="col">Last success</th><th scope="col">Last failure</th><th scope="col">Failed in a row</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`
}

function renderTimelines(store: StoreSnapshot, id: string, input: PageInput): string {
  if (!store.tasks || store.tasks.length === 0) return ''
  const to = store.now.getTime()
  const from = to - input.windowMs
  const legend = (Object.keys(KIND_LABELS) as MarkKind[])
    .map((kind) => `<li class="k-${kind}">${KIND_LABELS[kind]}</li>`)
    .join('')
  const fitted =
    input.window === 'auto' ? ' <span class="muted">(fitted to the busiest task\'s latest runs)</span>' : ''
  return `<h3>Timeline, last ${windowText(input.windowMs)}${fitted}</h3>
<ul class="legend" aria-label="Legend">${legend}</ul>
${store.tasks
  .map(
    (
      task: TaskView,
    ) => `<figure id="${id}-timeline-${slug(task.task.name)}"><figcaption>${escapeHtml(task.task.name)} <span class="muted">(${counts(task.runs.filter((run) => inWindow(run, from, to)))})</span></figcaption>
${timelineSvg(task.task.name, task.runs, from, to)}</figure>`,
  )
  .join('\n')}`
}

function renderLocks(store: StoreSnapshot, index: number, id: string, input: PageInput): string {
  const q = input.filter.toLowerCase()
  const match = (l: LockRecord): boolean =>
    q === '' || l.name.toLowerCase().includes(q) || (l.lockedBy ?? '').toLowerCase().includes(q)
  const locks = store.locks.filter(match)
  const slots = store.slotRecords.filter(match)
  const heldCount = locks.filter((l) => l.held).length
  return `<h3>Locks <span class="muted">(${heldCount} held, ${locks.length - heldCount} expired or released${q ? `, filtered by “${escapeHtml(input.filter)}”` : ''})</span></h3>
<form method="get" class="filter" role="search"><input type="hidden" name="window" value="${input.window}">
<label for="${id}-q">Filter locks</label> <input id="${id}-q" name="q" type="search" value="${escapeHtml(input.filter)}" placeholder="name or holder" data-filter="${id}-locks"> <button type="submit">Filter</button></form>
${lockTable(`${id}-locks`, locks, index, input, `Locks of ${store.label}`, true)}
<details class="slots"><summary>Slot records (${slots.length})</summary>
<p class="muted">One per scheduled run of a task that runs once per slot (<code>NAME@SLOT</code>), kept for the slot retention; <code>NAME@catch-up</code> is held while a catch-up runs.</p>
${lockTable(`${id}-slots`, slots, index, input, `Slot records of ${store.label}`, false)}
</details>`
}

function lockTable(
  tableId: string,
  locks: readonly LockRecord[],
  store: number,
  input: PageInput,
  caption: string,
  tasks: boolean,
): string {
  if (locks.length === 0) return `<p class="muted" id="${tableId}">None.</p>`
  const actions = input.csrf === undefined ? undefined : input.actions
  const pausable = tasks && actions?.pause[store] === true
  const triggerable = tasks && actions?.trigger?.[store] === true
  const actionColumn = actions?.release === true || pausable || triggerable
  const rows = locks.map(
    (l) => `<tr class="${l.held ? 'held' : 'expired'}" data-lock="${escapeHtml(l.name)}" data-held="${l.held}">
<th scope="row">${escapeHtml(l.name)}</th><td data-label="State">${l.held ? (pauseOf(l) ? '<span class="badge paused">paused</span>' : '<span class="badge held">held</span>') : '<span class="badge free">expired</span>'}</td>
<td data-label="Held by">${escapeHtml(l.lockedBy ?? '-')}</td><td data-label="Since">${timeHtml(l.lockedAt)}</td><td data-label="Until">${timeHtml(l.lockUntil)}</td>
<td class="num" data-label="Left">${l.remainingMs === undefined ? '-' : l.held ? escapeHtml(formatDuration(Math.floor(l.remainingMs / 1000) * 1000 || 0)) : '0'}</td>
${actionColumn ? `<td>${actionForm(l, store, input, pausable)}${triggerable && !pauseOf(l) ? triggerForm(l, store, input) : ''}</td>` : ''}</tr>`,
  )
  return `<table class="locks" id="${tableId}"><caption class="visually-hidden">${escapeHtml(caption)}</caption>
<thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Held by</th><th scope="col">Since</th><th scope="col">Until</th><th scope="col">Left</th>${actionColumn ? '<th scope="col">Action</th>' : ''}</tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`
}

/**
 * The action of a lock's row: Resume… for a paused task, Release… for a lock a run holds, Pause…
 * for a free task lock (where the store can take a pause). Each first asks for a confirmation
 * page, which posts the action itself.
 */
function actionForm(lock: LockRecord, store: number, input: PageInput, pausable: boolean): string {
  const paused = pauseOf(lock) !== undefined
  const form = (step: string, label: string): string =>
    `<form method="post" action="${query({ window: input.window, q: input.filter })}" class="release">${hiddenRecord(lock, store, input.csrf!)}<input type="hidden" name="step" value="${step}"><button type="submit" aria-label="${label} ${escapeHtml(lock.name)}…">${label}…</button></form>`
  if (paused && pausable) return form('resume-confirm', 'Resume')
  if (lock.held) return input.actions?.release === true ? form('confirm', 'Release') : ''
  return pausable ? form('pause-confirm', 'Pause') : ''
}

/** Run now… for a task lock that no pause holds: a trigger, first confirmed. */
function triggerForm(lock: LockRecord, store: number, input: PageInput): string {
  return `<form method="post" action="${query({ window: input.window, q: input.filter })}" class="release">${hiddenRecord(lock, store, input.csrf!)}<input type="hidden" name="step" value="trigger-confirm"><button type="submit" aria-label="Run ${escapeHtml(lock.name)} now…">Run now…</button></form>`
}

/**
 * The hidden fields that name a lock's acquisition as it was read (holder and time taken, not its
 * expiry, which the holder's lease renewals move): the release frees only that acquisition.
 */
export function hiddenRecord(lock: LockRecord, store: number, csrf: string): string {
  const field = (name: string, value: string): string =>
    `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`
  return [
    field('csrf', csrf),
    field('store', String(store)),
    field('lock', lock.name),
    field('lockedBy', lock.lockedBy ?? ''),
    field('lockedAt', lock.lockedAt?.toISOString() ?? ''),
  ].join('')
}

/** The confirmation page of a release. */
export function renderConfirm(input: PageInput, storeLabel: string, lock: LockRecord, store: number): string {
  const body = `<h2>Release lock “${escapeHtml(lock.name)}”?</h2>
<p>Held by <strong>${escapeHtml(lock.lockedBy ?? 'unknown')}</strong> since ${timeHtml(lock.lockedAt)} until ${timeHtml(lock.lockUntil)}, in ${escapeHtml(storeLabel)}.</p>
<p>Another node may start the task at once. Release only a lock whose holder is dead or stuck. If the lock changes before you confirm, nothing is released.</p>
<form method="post" action="${query({ window: input.window, q: input.filter })}">${hiddenRecord(lock, store, input.csrf!)}<input type="hidden" name="step" value="release">
<button type="submit" class="danger" autofocus>Release now</button> <a href="${query({ window: input.window, q: input.filter })}">Cancel</a></form>`
  // Given as it is, never as a String.replace() replacement, where `$&` or `$'` in a lock name
  // would pull parts of the page (other locks' forms) into the confirmation.
  return renderPage({ ...input, refreshSeconds: 0 }, body)
}

function stateBadge(task: TaskView): string {
  const max =
    task.maxAge === undefined ? '' : ` <span class="muted">(max ${escapeHtml(formatDuration(task.maxAge))})</span>`
  const words = { ok: 'ok', failing: 'failing', stale: 'STALE', overdue: 'OVERDUE' }[task.state]
  const missed = task.state === 'overdue' ? task.task.lastRun?.nextFireAt : undefined
  // The fire time the schedule missed: what an operator looks for first.
  const due = missed ? ` <span class="muted">(due ${timeHtml(missed)})</span>` : ''
  return `<span class="badge s-${task.state}">${words}</span>${due}${max}`
}

/** A task's lock in a cell: paused (by whom, why, until), held (by whom, since, until), free, or no record. */
export function lockCell(lock: LockRecord | undefined): string {
  if (!lock) return '<span class="muted">no record</span>'
  const pause = pauseOf(lock)
  if (pause)
    return `<span class="badge paused">paused</span> ${escapeHtml(describePause(pause).replace(/^paused /, ''))}`
  if (!lock.held)
    // lockUntil of a lock not held is when it expired or was released: free since then.
    return `<span class="badge free">free</span> <span class="muted">since ${timeHtml(lock.lockUntil)}</span>`
  return `<span class="badge held">held</span> by ${escapeHtml(lock.lockedBy ?? 'unknown')}<br><span class="muted">since ${timeHtml(lock.lockedAt)} until ${timeHtml(lock.lockUntil)}</span>`
}

/** Why a skipped last run did not run (what held the lock, or the run it was folded into). */
function skippedWhy(run: RunRecord, task: TaskView): string {
  if (run.outcome !== 'skipped') return ''
  return `<br><span class="muted why">${escapeHtml(markOf(run, task.runs).why)}</span>`
}

/** A run's outcome as a coloured badge. */
export function outcomeBadge(run: RunRecord): string {
  return `<span class="badge o-${run.outcome}">${run.outcome}</span>`
}

function durationOf(run: RunRecord): string {
  if (run.durationMs === undefined || run.outcome === 'skipped') return ''
  return `, ${run.durationMs < 1000 ? `${Math.round(run.durationMs)} ms` : `${(run.durationMs / 1000).toFixed(1)} s`}`
}

function counts(runs: readonly RunRecord[]): string {
  if (runs.length === 0) return 'no runs'
  const by = new Map<string, number>()
  for (const run of runs) by.set(run.outcome, (by.get(run.outcome) ?? 0) + 1)
  return [...by].map(([outcome, n]) => `${n} ${outcome}`).join(', ')
}

/** The page's own address with `params` as its query (empty values left out), escaped for an attribute. */
export function query(params: Record<string, string>): string {
  const search = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '' && v !== undefined))
  const text = search.toString()
  return text === '' ? '?' : `?${escapeHtml(text)}`
}

function slug(name: string): string {
  return encodeURIComponent(name).replace(/%/g, '_')
}

function plural(n: number): string {
  return n === 1 ? '' : 's'
}
