import type { OverheadRow } from './result.ts'
import { formatLatency } from './report.ts'

const ROW_HEIGHT = 16
const GROUP_GAP = 10
const LABEL_WIDTH = 130
const BAR_WIDTH = 420
const VALUE_WIDTH = 90
const COLORS = { ours: '#2b6cb0', baseline: '#a0aec0' } as const

/** `&`, `<`, `>` and `"` escaped for SVG text and attributes. */
function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;')
}

/**
 * A horizontal bar chart of the overhead measurement's p50, ours against the baseline, one pair
 * of bars per store and caller count, as a self-contained SVG (no scripts, fonts or network).
 * Each pair is scaled to its own baseline, since stores differ by orders of magnitude: the
 * baseline's bar is always the same length and ours shows the ratio; the absolute p50s are
 * written beside the bars. Returns `undefined` when there is nothing to draw.
 */
export function p50Chart(rows: readonly OverheadRow[], title: string): string | undefined {
  const drawable = rows.filter(
    (r) => Number.isFinite(r.ours.latency.p50) && Number.isFinite(r.baseline.latency.p50) && r.baseline.latency.p50 > 0,
  )
  if (drawable.length === 0) return undefined
  // Ours may be slower than the baseline: the longest ratio sets the scale (at least 1.5×).
  const maxRatio = Math.max(1.5, ...drawable.map((r) => r.ours.latency.p50 / r.baseline.latency.p50))
  const unit = BAR_WIDTH / maxRatio
  const top = 48
  const groupHeight = 2 * ROW_HEIGHT + GROUP_GAP
  const height = top + drawable.length * groupHeight + 30
  const width = LABEL_WIDTH + BAR_WIDTH + VALUE_WIDTH + 20
  const out: string[] = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
  )
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`)
  out.push(`<text x="10" y="18" font-size="13" font-weight="bold">${escapeXml(title)}</text>`)
  out.push(`<rect x="10" y="28" width="10" height="10" fill="${COLORS.ours}"/><text x="24" y="37">shedlock</text>`)
  out.push(
    `<rect x="90" y="28" width="10" height="10" fill="${COLORS.baseline}"/><text x="104" y="37">baseline (same commands, raw)</text>`,
  )
  drawable.forEach((r, i) => {
    const y = top + i * groupHeight
    const ratio = r.ours.latency.p50 / r.baseline.latency.p50
    const label = `${r.store}, ${r.concurrency} caller${r.concurrency === 1 ? '' : 's'}`
    out.push(`<text x="10" y="${y + ROW_HEIGHT + 4}">${escapeXml(label)}</text>`)
    const bars: [keyof typeof COLORS, number, number][] = [
      ['ours', ratio, r.ours.latency.p50],
      ['baseline', 1, r.baseline.latency.p50],
    ]
    bars.forEach(([side, length, p50], j) => {
      const barY = y + j * ROW_HEIGHT
      const w = Math.max(1, length * unit)
      out.push(
        `<rect x="${LABEL_WIDTH}" y="${barY}" width="${w.toFixed(1)}" height="${ROW_HEIGHT - 3}" fill="${COLORS[side]}"/>`,
      )
      const text = side === 'ours' ? `${formatLatency(p50)} (${ratio.toFixed(2)}×)` : formatLatency(p50)
      out.push(`<text x="${(LABEL_WIDTH + w + 4).toFixed(1)}" y="${barY + ROW_HEIGHT - 5}">${escapeXml(text)}</text>`)
    })
  })
  // The baseline's length, for the eye: ratios right of this line are slower than the baseline.
  const x1 = LABEL_WIDTH + unit
  out.push(
    `<line x1="${x1.toFixed(1)}" y1="${top - 4}" x2="${x1.toFixed(1)}" y2="${height - 26}" stroke="#718096" stroke-dasharray="3,3"/>`,
  )
  out.push(
    `<text x="10" y="${height - 10}" fill="#4a5568">p50 of acquire + release; each pair scaled to its baseline (dashed line = 1×)</text>`,
  )
  out.push('</svg>')
  return `${out.join('\n')}\n`
}
