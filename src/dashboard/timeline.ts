import type { RunRecord } from '../core/run-ledger.ts'
import { escapeHtml, timeText } from './escape.ts'

/**
 * What a mark of the timeline stands for, read from the run ledger:
 * - `ok`, `failed`, `lock-lost`, `running`: a run, as the ledger recorded it;
 * - `abandoned`: a run whose node stopped before it recorded its end (its lock lapsed);
 * - `caught-up`: a slot run that started more than {@link LATE_MS} after its slot: a catch-up ran
 *   it after every node missed it (it ended `ok`, `failed` or `lock-lost`: see `outcome`);
 * - `skipped`: a slot recorded as skipped at its fire time: the task's lock was held (a long run of
 *   an earlier slot);
 * - `missed`: a slot recorded as skipped long after its fire time: every node missed it, and a
 *   catch-up (policy `'once'`) folded it into its one run.
 */
export type MarkKind = 'ok' | 'failed' | 'lock-lost' | 'running' | 'abandoned' | 'caught-up' | 'skipped' | 'missed'

/**
 * A slot run that starts later than this after its slot was run by a catch-up, not by a scheduler
 * firing on time: schedulers fire within a second or two, a catch-up when a node starts.
 */
export const LATE_MS = 60_000

/** One mark: a run or a slot, on the lane of its node. */
export interface Mark {
  readonly kind: MarkKind
  readonly run: RunRecord
  /** Why, in words, for the tooltip and the legend. */
  readonly why: string
}

/** The kind of mark a ledger entry makes. */
export function markOf(run: RunRecord): Mark {
  const late = run.slot !== undefined && run.startedAt.getTime() - run.slot.getTime() > LATE_MS
  if (run.outcome === 'skipped') {
    return late
      ? { kind: 'missed', run, why: 'missed: every node was down at its fire time; a catch-up ran a later slot for it' }
      : { kind: 'skipped', run, why: 'skipped: the lock was held (a run of an earlier slot)' }
  }
  if (late && run.outcome !== 'running')
    return {
      kind: 'caught-up',
      run,
      why: `caught up: missed at its fire time, run later by a catch-up (${run.outcome})`,
    }
  const why = {
    ok: 'ran, ok',
    failed: 'ran, failed',
    'lock-lost': 'ran, lock lost: another node may have run it too',
    running: 'running',
    abandoned: 'abandoned: its node stopped before the run ended, and its lock lapsed',
  }[run.outcome]
  return { kind: run.outcome, run, why }
}

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
  missed: 'missed',
}

const WIDTH = 960
const LEFT = 170
const LANE = 26
const AXIS = 22

/**
 * The timeline of one task as SVG: one lane per node, runs as bars from start to end (at least
 * 3 px), skipped slots as hollow diamonds, missed ones as crosses, caught-up runs with a dotted
 * line back to their slot. Each mark has a `<title>` (its tooltip) and `data-*` attributes.
 */
export function timelineSvg(task: string, runs: readonly RunRecord[], from: number, to: number): string {
  const nodes = [...new Set(runs.map((run) => laneOf(run.node)))].sort()
  const height = AXIS + Math.max(1, nodes.length) * LANE + 4
  const span = Math.max(1, to - from)
  const x = (t: number): number => LEFT + ((Math.min(Math.max(t, from), to) - from) / span) * (WIDTH - LEFT - 10)
  const parts: string[] = []
  // Axis: five ticks, store time (UTC).
  for (let i = 0; i <= 4; i++) {
    const t = from + (span * i) / 4
    const at = x(t).toFixed(1)
    parts.push(`<line x1="${at}" y1="${AXIS - 4}" x2="${at}" y2="${height}" stroke="#d0d7de" stroke-width="1"/>`)
    const anchor = i === 0 ? 'start' : i === 4 ? 'end' : 'middle'
    parts.push(
      `<text x="${at}" y="12" font-size="11" text-anchor="${anchor}" fill="#57606a">${escapeHtml(tickText(t, span))}</text>`,
    )
  }
  if (nodes.length === 0)
    parts.push(`<text x="${LEFT}" y="${AXIS + 17}" font-size="12" fill="#57606a">no runs in this window</text>`)
  nodes.forEach((node, lane) => {
    const y = AXIS + lane * LANE
    parts.push(
      `<text x="4" y="${y + 17}" font-size="12" fill="#24292f">${escapeHtml(shorten(node, 26))}<title>${escapeHtml(node)}</title></text>`,
    )
    parts.push(`<line x1="${LEFT}" y1="${y + LANE / 2}" x2="${WIDTH - 10}" y2="${y + LANE / 2}" stroke="#eaeef2"/>`)
    for (const run of runs.filter((r) => laneOf(r.node) === node)) parts.push(markSvg(markOf(run), y, x, to))
  })
  const label = `Timeline of ${task}: ${runs.length} run${runs.length === 1 ? '' : 's'} on ${nodes.length} node${nodes.length === 1 ? '' : 's'}`
  return `<svg class="timeline" role="img" aria-label="${escapeHtml(label)}" viewBox="0 0 ${WIDTH} ${height}" width="100%" data-task="${escapeHtml(task)}" xmlns="http://www.w3.org/2000/svg">${parts.join('')}</svg>`
}

function markSvg(mark: Mark, y: number, x: (t: number) => number, to: number): string {
  const { run, kind } = mark
  const color = COLORS[kind]
  const mid = y + LANE / 2
  const title = `<title>${escapeHtml(tooltip(mark))}</title>`
  const data = `class="mark" data-kind="${kind}" data-run="${escapeHtml(run.id)}" data-lane="${escapeHtml(laneOf(run.node))}"`
  if (kind === 'skipped' || kind === 'missed') {
    const cx = x((run.slot ?? run.startedAt).getTime())
    if (kind === 'skipped') {
      return `<g ${data}><path d="M${cx.toFixed(1)} ${mid - 6}l6 6l-6 6l-6 -6z" fill="#fff" stroke="${color}" stroke-width="2"/>${title}</g>`
    }
    return `<g ${data}><path d="M${(cx - 5).toFixed(1)} ${mid - 5}l10 10m0 -10l-10 10" stroke="${color}" stroke-width="2"/>${title}</g>`
  }
  const start = x(run.startedAt.getTime())
  const end = x(
    run.finishedAt?.getTime() ?? (kind === 'running' ? to : run.startedAt.getTime() + (run.durationMs ?? 0)),
  )
  const width = Math.max(3, end - start)
  const back =
    kind === 'caught-up' && run.slot
      ? `<line x1="${x(run.slot.getTime()).toFixed(1)}" y1="${mid}" x2="${start.toFixed(1)}" y2="${mid}" stroke="${color}" stroke-dasharray="2 3"/><circle cx="${x(run.slot.getTime()).toFixed(1)}" cy="${mid}" r="3" fill="${color}"/>`
      : ''
  const fill =
    kind === 'caught-up' && run.outcome !== 'ok' ? COLORS[run.outcome === 'lock-lost' ? 'lock-lost' : 'failed'] : color
  return `<g ${data} data-outcome="${run.outcome}">${back}<rect x="${start.toFixed(1)}" y="${mid - 7}" width="${width.toFixed(1)}" height="14" rx="2" fill="${fill}"${kind === 'caught-up' ? ` stroke="${color}" stroke-width="2"` : ''}/>${title}</g>`
}

/**
 * The lane of a run: its node without the per-acquisition suffix shedlock's owners end with
 * (`<host>:<pid>:<12 hex digits>`), so that one process is one lane.
 */
export function laneOf(node: string): string {
  return node.replace(/:[0-9a-f]{12}$/, '')
}

function tooltip(mark: Mark): string {
  const { run } = mark
  const lines = [`${run.name} on ${run.node}: ${mark.why}`, `started ${timeText(run.startedAt)}`]
  if (run.slot) lines.push(`slot ${timeText(run.slot)}`)
  if (run.durationMs !== undefined && run.outcome !== 'skipped') lines.push(`took ${Math.round(run.durationMs)} ms`)
  if (run.error) lines.push(`${run.error.type}: ${run.error.message}`)
  return lines.join('\n')
}

function tickText(t: number, span: number): string {
  const iso = new Date(t).toISOString()
  // Within a day the time is enough; a week needs the date.
  return span <= 86_400_000 ? `${iso.slice(11, 16)}Z` : `${iso.slice(5, 10)} ${iso.slice(11, 16)}Z`
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}
