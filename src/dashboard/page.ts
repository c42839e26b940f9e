import { formatDuration } from '../core/duration.ts'
import type { LockRecord } from '../core/lock-inspector.ts'
import type { RunRecord } from '../core/run-ledger.ts'
import { escapeHtml, timeHtml } from './escape.ts'
import { type DashboardWindow, type StoreSnapshot, type TaskView, WINDOW_MS } from './snapshot.ts'
import { KIND_LABELS, type MarkKind, timelineSvg } from './timeline.ts'

/** What the page is rendered from. */
export interface PageInput {
  readonly title: string
  readonly stores: readonly StoreSnapshot[]
  readonly window: DashboardWindow
  /** The lock filter (`?q=`): a substring of the name or holder. */
  readonly filter: string
  /** The CSRF token of the release forms; `undefined` when releasing is off. */
  readonly csrf: string | undefined
  /** Seconds between live refreshes; 0 for none. */
  readonly refreshSeconds: number
  /** A per-response nonce for the inline style and script (the Content-Security-Policy allows nothing else). */
  readonly nonce: string
  /** A line shown on top, e.g. the outcome of a release. */
  readonly notice?: string | undefined
}

const WINDOWS: readonly DashboardWindow[] = ['hour', 'day', 'week']

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
      ? `<strong aria-current="page">${w}</strong>`
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
  const failing = tasks.filter((t) => t.state === 'failing').length
  const held = input.stores.reduce((n, s) => n + s.locks.filter((l) => l.held).length, 0)
  const summary = `${input.stores.length} store${plural(input.stores.length)}, ${tasks.length} task${plural(tasks.length)}: ${stale} stale, ${failing} failing; ${held} lock${plural(held)} held`
  return `${input.notice ? `<p class="notice" role="status">${escapeHtml(input.notice)}</p>` : ''}
<p id="summary" class="${stale + failing > 0 ? 'bad' : 'good'}">${escapeHtml(summary)}</p>
${input.stores.map((store, index) => renderStore(store, index, input)).join('\n')}
<footer>Times are the stores' (UTC); hover one for your local time. Updated ${timeHtml(new Date())}.${input.refreshSeconds > 0 ? ` Refreshes every ${input.refreshSeconds} s.` : ''} <a href="healthz">/healthz</a></footer>`
}

function renderStore(store: StoreSnapshot, index: number, input: PageInput): string {
  const id = `store-${index}`
  return `<section class="store" aria-labelledby="${id}">
<h2 id="${id}">${escapeHtml(store.label)}</h2>
<p class="muted">Now ${timeHtml(store.now)} on ${escapeHtml(store.clock)}.</p>
${store.errors.map(errorHtml).join('\n')}
${renderTasks(store, id)}
${renderTimelines(store, id, input)}
${renderLocks(store, index, id, input)}
</section>`
}

/** A read that failed (`locks: ...`, `runs: ...`): its first line, then the rest of the store's advice (a CREATE TABLE...) as it is. */
function errorHtml(error: string): string {
  const [first, ...rest] = error.split('\n')
  return `<div class="error" role="alert"><p>${escapeHtml(first!)}</p>${rest.length > 0 ? `<pre>${escapeHtml(rest.join('\n'))}</pre>` : ''}</div>`
}

function renderTasks(store: StoreSnapshot, id: string): string {
  if (store.tasks === undefined)
    return `<p class="muted">This store keeps no run history: tasks and runs are shown for PostgreSQL, MySQL/MariaDB, SQLite and Redis.</p>`
  if (store.tasks.length === 0)
    return `<h3>Tasks</h3><p class="muted">No runs recorded yet. Executors record runs when given a run ledger (<code>runLedger</code> option, or <code>shedlock run</code>).</p>`
  const rows = store.tasks.map((task) => {
    const last = task.task.lastRun
    const failure = task.task.lastFailure
    return `<tr class="task state-${task.state}" data-task="${escapeHtml(task.task.name)}" data-state="${task.state}">
<th scope="row"><a href="#${id}-timeline-${slug(task.task.name)}">${escapeHtml(task.task.name)}</a></th>
<td>${stateBadge(task)}</td>
<td>${lockCell(task.lock)}</td>
<td>${last ? `${outcomeBadge(last)} ${timeHtml(last.startedAt)}<br><span class="muted">on ${escapeHtml(last.node)}${durationOf(last)}</span>` : '<span class="muted">never</span>'}</td>
<td>${task.task.lastSuccess ? `${timeHtml(task.task.lastSuccess.startedAt)}<span class="muted">${durationOf(task.task.lastSuccess)}</span>` : '<span class="muted">never</span>'}</td>
<td>${failure ? `${timeHtml(failure.startedAt)}<br>${failure.error ? `<span class="err">${escapeHtml(failure.error.type)}: ${escapeHtml(failure.error.message)}</span>` : escapeHtml(failure.outcome)}` : '<span class="muted">-</span>'}</td>
<td class="num">${task.task.consecutiveFailures}</td>
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
  const from = to - WINDOW_MS[input.window]
  const legend = (Object.keys(KIND_LABELS) as MarkKind[])
    .map((kind) => `<li class="k-${kind}">${KIND_LABELS[kind]}</li>`)
    .join('')
  return `<h3>Timeline, last ${input.window}</h3>
<ul class="legend" aria-label="Legend">${legend}</ul>
${store.tasks
  .map(
    (
      task: TaskView,
    ) => `<figure id="${id}-timeline-${slug(task.task.name)}"><figcaption>${escapeHtml(task.task.name)} <span class="muted">(${counts(task.runs)})</span></figcaption>
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
${lockTable(`${id}-locks`, locks, index, input, `Locks of ${store.label}`)}
<details class="slots"><summary>Slot records (${slots.length})</summary>
<p class="muted">One per scheduled run of a task that runs once per slot (<code>NAME@SLOT</code>), kept for the slot retention; <code>NAME@catch-up</code> is held while a catch-up runs.</p>
${lockTable(`${id}-slots`, slots, index, input, `Slot records of ${store.label}`)}
</details>`
}

function lockTable(
  tableId: string,
  locks: readonly LockRecord[],
  store: number,
  input: PageInput,
  caption: string,
): string {
  if (locks.length === 0) return `<p class="muted" id="${tableId}">None.</p>`
  const release = input.csrf !== undefined
  const rows = locks.map(
    (l) => `<tr class="${l.held ? 'held' : 'expired'}" data-lock="${escapeHtml(l.name)}" data-held="${l.held}">
<th scope="row">${escapeHtml(l.name)}</th><td>${l.held ? '<span class="badge held">held</span>' : '<span class="badge free">expired</span>'}</td>
<td>${escapeHtml(l.lockedBy ?? '-')}</td><td>${timeHtml(l.lockedAt)}</td><td>${timeHtml(l.lockUntil)}</td>
<td class="num">${l.remainingMs === undefined ? '-' : l.held ? escapeHtml(formatDuration(Math.floor(l.remainingMs / 1000) * 1000 || 0)) : '0'}</td>
${release ? `<td>${l.held ? releaseForm(l, store, input.csrf!, input) : ''}</td>` : ''}</tr>`,
  )
  return `<table class="locks" id="${tableId}"><caption class="visually-hidden">${escapeHtml(caption)}</caption>
<thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Held by</th><th scope="col">Since</th><th scope="col">Until</th><th scope="col">Left</th>${release ? '<th scope="col">Action</th>' : ''}</tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`
}

/** The first step of a release: it asks for a confirmation page, which posts the release itself. */
function releaseForm(lock: LockRecord, store: number, csrf: string, input: PageInput): string {
  return `<form method="post" action="${query({ window: input.window, q: input.filter })}" class="release">${hiddenRecord(lock, store, csrf)}<input type="hidden" name="step" value="confirm"><button type="submit" aria-label="Release ${escapeHtml(lock.name)}…">Release…</button></form>`
}

/** The hidden fields that name a lock as it was read: the release frees only that state of it. */
export function hiddenRecord(lock: LockRecord, store: number, csrf: string): string {
  const field = (name: string, value: string): string =>
    `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`
  return [
    field('csrf', csrf),
    field('store', String(store)),
    field('lock', lock.name),
    field('lockedBy', lock.lockedBy ?? ''),
    field('lockUntil', lock.lockUntil?.toISOString() ?? ''),
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
  const words = { ok: 'ok', failing: 'failing', stale: 'STALE' }[task.state]
  return `<span class="badge s-${task.state}">${words}</span>${max}`
}

function lockCell(lock: LockRecord | undefined): string {
  if (!lock) return '<span class="muted">no record</span>'
  if (!lock.held)
    return `<span class="badge free">free</span> <span class="muted">until ${timeHtml(lock.lockUntil)}</span>`
  return `<span class="badge held">held</span> by ${escapeHtml(lock.lockedBy ?? 'unknown')}<br><span class="muted">since ${timeHtml(lock.lockedAt)} until ${timeHtml(lock.lockUntil)}</span>`
}

function outcomeBadge(run: RunRecord): string {
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

function query(params: Record<string, string>): string {
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

const CSS = `
:root{color-scheme:light;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#24292f}
body{margin:0 auto;max-width:1200px;padding:0 16px 32px}
header{display:flex;flex-wrap:wrap;align-items:baseline;justify-content:space-between;border-bottom:1px solid #d0d7de;margin-bottom:8px}
h1{font-size:20px;margin:12px 0}h2{font-size:18px;margin:24px 0 4px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;width:100%;margin:4px 0 8px}th,td{text-align:left;vertical-align:top;padding:5px 8px;border-bottom:1px solid #eaeef2}
thead th{background:#f6f8fa;font-weight:600}td.num{text-align:right}
.muted{color:#57606a}.err{color:#a40e26}.error{background:#ffebe9;padding:6px 10px;border-radius:6px}
.error p{margin:0}.error pre{margin:6px 0 0;white-space:pre-wrap;font-size:12px}
.notice{background:#ddf4ff;padding:6px 10px;border-radius:6px}
#summary{font-weight:600;padding:6px 10px;border-radius:6px}#summary.bad{background:#ffebe9}#summary.good{background:#dafbe1}
.badge{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;font-weight:600;border:1px solid transparent}
.s-ok,.o-ok{background:#dafbe1;color:#116329}.s-failing,.o-failed{background:#ffebe9;color:#a40e26}.s-stale{background:#a40e26;color:#fff}
.o-lock-lost{background:#fff1e5;color:#953800}.o-running{background:#ddf4ff;color:#0550ae}.o-skipped{background:#eaeef2;color:#424a53}
.held{background:#fff8c5}.badge.held{color:#7d4e00}.badge.free{background:#eaeef2;color:#424a53}
tr.held{background:none}tr.expired th,tr.expired td{color:#57606a}
figure{margin:8px 0 14px}figcaption{font-weight:600;margin-bottom:2px}
svg.timeline{border:1px solid #d0d7de;border-radius:6px;background:#fff;max-width:100%}
.legend{list-style:none;padding:0;margin:0 0 6px;display:flex;gap:14px;flex-wrap:wrap;font-size:12px}
.legend li::before{content:"";display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px;vertical-align:-1px}
.k-ok::before{background:#1a7f37}.k-failed::before{background:#cf222e}.k-lock-lost::before{background:#bc4c00}.k-running::before{background:#0969da}
.k-caught-up::before{background:#fff;border:2px solid #8250df}.k-skipped::before{background:#fff;border:2px solid #6e7781;transform:rotate(45deg)}.k-missed::before{content:"✕";width:auto;height:auto;color:#6e7781}
form.release{margin:0}button{font:inherit;padding:2px 10px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;cursor:pointer}
button.danger{background:#cf222e;color:#fff;border-color:#a40e26}
a:focus,button:focus,input:focus,summary:focus,main:focus{outline:2px solid #0969da;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:8px;top:8px;background:#fff;padding:4px}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
footer{margin-top:24px;color:#57606a;font-size:12px}
`

// Adds the reader's local time to every <time>'s tooltip, filters the lock tables as one types,
// and replaces <main> every few seconds (kept while the reader is typing or a form is focused).
const SCRIPT = `(function(){
var main=document.getElementById('main');
function local(){document.querySelectorAll('time[datetime]').forEach(function(t){var d=new Date(t.getAttribute('datetime'));t.title='Your local time: '+d.toLocaleString()})}
function filter(){document.querySelectorAll('input[data-filter]').forEach(function(i){var q=i.value.toLowerCase();var t=document.getElementById(i.getAttribute('data-filter'));if(!t||!t.tBodies)return;Array.prototype.forEach.call(t.tBodies[0].rows,function(r){r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0})})}
document.addEventListener('input',function(e){if(e.target.matches&&e.target.matches('input[data-filter]'))filter()});
local();
var every=Number(main.getAttribute('data-refresh'))||0;
if(every>0)setInterval(function(){
var a=document.activeElement;if(a&&a!==document.body&&main.contains(a)&&a.tagName!=='A')return;
var u=new URL(location.href);u.searchParams.set('fragment','main');
fetch(u,{headers:{accept:'text/html'},credentials:'same-origin'}).then(function(r){return r.ok?r.text():null}).then(function(h){if(h===null)return;var focused=a&&a.id;main.innerHTML=h;local();filter();if(focused){var f=document.getElementById(focused);if(f)f.focus()}}).catch(function(){})
},every*1000);
})();`
