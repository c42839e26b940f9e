import type { RunRecord } from '../core/run-ledger.ts'
import { escapeHtml, timeText } from './escape.ts'
import { LATE_MS, type Mark, type MarkKind, markOf } from './marks.ts'

export { LATE_MS, type Mark, type MarkKind, markOf }

const COLORS: Readonly<Record<MarkKind, string>> = {
  ok: '#1a7f37',
  failed: '#cf222e',
  'lock-lost': '#bc4c00',
  running: '#0969da',
  abandoned: '#953800',
  'caught-up': '#8250df',
  skipped: '#6e7781',
  missed: '#6e7781',
}

/** Words of each kind, for the legend. */
export const KIND_LABELS: Readonly<Record<MarkKind, string>> = {
  ok: 'ok',
  failed: 'failed',
  'lock-lost': 'lock lost',
  running: 'running',
  abandoned: 'abandoned',
  'caught-up': 'caught up',
  skipped: 'skipped (lock held)',
  missed: 'folded into a later run (once)',
}

// Heights in CSS pixels. Widths are percentages of the SVG's width, which is the page's: the SVG
// has no viewBox, so its text keeps its size on a phone instead of shrinking with the drawing.
const AXIS = 22
const LANE = 38
const LEFT = 1.5
const RIGHT = 98.5

/**
 * The timeline of one task as SVG: one lane per node (its name above its marks), runs as bars from
 * start to end (at least 3 px), skipped slots as hollow diamonds, folded ones as crosses, caught-up
 * runs with a dotted line back to their slot. Each mark has a `<title>` (its tooltip, from
 * {@link markOf} over `runs`) and `data-*` attributes. Runs outside `from`..`to` are not drawn.
 */
export function timelineSvg(task: string, runs: readonly RunRecord[], from: number, to: number): string {
  const shown = runs.filter((run) => inWindow(run, from, to))
  const nodes = [...new Set(shown.map((run) => laneOf(run.node)))].sort()
  const height = AXIS + Math.max(1, nodes.length) * LANE + 4
  const span = Math.max(1, to - from)
  const x = (t: number): number => LEFT + ((Math.min(Math.max(t, from), to) - from) / span) * (RIGHT - LEFT)
  const parts: string[] = []
  // Axis: five ticks, store time (UTC); the phone layout keeps the first, middle and last.
  for (let i = 0; i <= 4; i++) {
    const t = from + (span * i) / 4
    const at = pct(x(t))
    parts.push(`<line x1="${at}" y1="${AXIS - 4}" x2="${at}" y2="${height}" stroke="#d0d7de" stroke-width="1"/>`)
    const anchor = i === 0 ? 'start' : i === 4 ? 'end' : 'middle'
    parts.push(
      `<text class="tick${i % 2 === 1 ? ' minor' : ''}" x="${at}" y="13" font-size="11" text-anchor="${anchor}" fill="#57606a">${escapeHtml(tickText(t, span))}</text>`,
    )
  }
  if (nodes.length === 0)
    parts.push(
      `<text class="label" x="${pct(LEFT)}" y="${AXIS + 17}" font-size="12" fill="#57606a">no runs in this window</text>`,
    )
  nodes.forEach((node, lane) => {
    const y = AXIS + lane * LANE
    const onLane = shown.filter((r) => laneOf(r.node) === node)
    const processes = [...new Set(onLane.map((r) => processOf(r.node)))].sort()
    const more = processes.length > 1 ? `<tspan fill="#57606a"> (${processes.length} processes)</tspan>` : ''
    parts.push(
      `<text class="label" x="${pct(LEFT)}" y="${y + 12}" font-size="12" fill="#24292f">${escapeHtml(shorten(node, 40))}${more}<title>${escapeHtml(`${node}: ${processes.join(', ')}`)}</title></text>`,
    )
    parts.push(`<line x1="${pct(LEFT)}" y1="${y + 26}" x2="${pct(RIGHT)}" y2="${y + 26}" stroke="#eaeef2"/>`)
    for (const run of onLane) parts.push(markSvg(markOf(run, runs), y + 26, x, to))
  })
  const label = `Timeline of ${task}: ${shown.length} run${shown.length === 1 ? '' : 's'} on ${nodes.length} node${nodes.length === 1 ? '' : 's'}`
  return `<svg class="timeline" role="img" aria-label="${escapeHtml(label)}" width="100%" height="${height}" data-task="${escapeHtml(task)}" xmlns="http://www.w3.org/2000/svg">${parts.join('')}</svg>`
}

/** True when `run` shows in `from`..`to`: it started or ended there, or ran across it. */
export function inWindow(run: RunRecord, from: number, to: number): boolean {
  const start = run.startedAt.getTime()
  const end = run.finishedAt?.getTime() ?? (run.outcome === 'running' ? to : start)
  return start <= to && end >= from
}

function markSvg(mark: Mark, mid: number, x: (t: number) => number, to: number): string {
  const { run, kind } = mark
  const color = COLORS[kind]
  const title = `<title>${escapeHtml(tooltip(mark))}</title>`
  const data = `class="mark" data-kind="${kind}" data-run="${escapeHtml(run.id)}" data-lane="${escapeHtml(laneOf(run.node))}"`
  // A shape of fixed size at a percentage: an inner <svg> placed there, drawn around its origin.
  const at = (t: number, shape: string): string => `<svg x="${pct(x(t))}" y="${mid}" overflow="visible">${shape}</svg>`
  if (kind === 'skipped' || kind === 'missed') {
    const t = (run.slot ?? run.startedAt).getTime()
    const shape =
      kind === 'skipped'
        ? `<path d="M0 -6l6 6l-6 6l-6 -6z" fill="#fff" stroke="${color}" stroke-width="2"/>`
        : `<path d="M-5 -5l10 10m0 -10l-10 10" stroke="${color}" stroke-width="2"/>`
    return `<g ${data}>${at(t, shape)}${title}</g>`
  }
  const startT = run.startedAt.getTime()
  const endT = run.finishedAt?.getTime() ?? (kind === 'running' ? to : startT + (run.durationMs ?? 0))
  const start = x(startT)
  const back =
    kind === 'caught-up' && run.slot
      ? `<line x1="${pct(x(run.slot.getTime()))}" y1="${mid}" x2="${pct(start)}" y2="${mid}" stroke="${color}" stroke-dasharray="2 3"/><circle cx="${pct(x(run.slot.getTime()))}" cy="${mid}" r="3" fill="${color}"/>`
      : ''
  const fill =
    kind === 'caught-up' && run.outcome !== 'ok' ? COLORS[run.outcome === 'lock-lost' ? 'lock-lost' : 'failed'] : color
  const edge = kind === 'caught-up' ? ` stroke="${color}" stroke-width="2"` : ''
  // The bar as long as the run, and at least 3 px wide at its start, whatever the page's width.
  const bar = `<rect x="${pct(start)}" y="${mid - 7}" width="${pct(Math.max(0, x(endT) - start))}" height="14" rx="2" fill="${fill}"${edge}/>`
  const least = at(startT, `<rect x="0" y="-7" width="3" height="14" fill="${fill}"/>`)
  return `<g ${data} data-outcome="${run.outcome}">${back}${bar}${least}${title}</g>`
}

/**
 * The lane of a run: the node that survives its restarts. A node is recorded as its lock's owner,
 * `<name>:<pid>:<12 hex digits>` (the name is the provider's `lockedBy`, by default the host name),
 * or as the executor's `node`, by default `<host name>:<pid>`; the lane is the name before the
 * `:<pid>`, so that each restart of a process stays on its host's lane. A name that ends in
 * `:<digits>` itself loses that part too.
 */
export function laneOf(node: string): string {
  return processOf(node).replace(/:\d+$/, '')
}

/** The process of a run: its node without the per-acquisition suffix (`<name>:<pid>`). */
function processOf(node: string): string {
  return node.replace(/:[0-9a-f]{12}$/, '')
}

function tooltip(mark: Mark): string {
  const { run } = mark
  const lines = [
    `${run.name} on ${run.node}: ${mark.why}`,
    `${run.outcome === 'skipped' ? 'recorded' : 'started'} ${timeText(run.startedAt)}`,
  ]
  if (run.slot) lines.push(`slot ${timeText(run.slot)}`)
  if (run.durationMs !== undefined && run.outcome !== 'skipped') lines.push(`took ${Math.round(run.durationMs)} ms`)
  // A skipped entry's `error` is its cause, which `why` says already.
  if (run.error && run.outcome !== 'skipped') lines.push(`${run.error.type}: ${run.error.message}`)
  return lines.join('\n')
}

function pct(value: number): string {
  return `${value.toFixed(2)}%`
}

function tickText(t: number, span: number): string {
  const iso = new Date(t).toISOString()
  // Within a day the time is enough; a week needs the date.
  return span <= 86_400_000 ? `${iso.slice(11, 16)}Z` : `${iso.slice(5, 10)} ${iso.slice(11, 16)}Z`
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}
