import { formatRatio, markdownTable } from './report.ts'
import type { FleetContender, FleetRow } from './result.ts'

/** A figure with up to three significant digits: `0.84`, `12.3`, `1,250`; `–` when not finite. */
function fig(value: number): string {
  if (!Number.isFinite(value)) return '–'
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US')
  if (Math.abs(value) >= 100) return value.toFixed(0)
  if (Math.abs(value) >= 10) return value.toFixed(1)
  return value.toFixed(2)
}

function ratioCell(c: FleetContender, pick: (r: NonNullable<FleetContender['oursOverPeer']>) => number): string {
  return c.oursOverPeer ? formatRatio(pick(c.oursOverPeer)) : ''
}

/** The fleet table: one line per store, size and contender, ours first. */
export function fleetTable(rows: readonly FleetRow[]): string {
  const lines: string[][] = []
  for (const row of rows) {
    for (const c of row.contenders) {
      lines.push([
        row.store,
        `${row.replicas} × ${row.jobs}`,
        c.label,
        `${c.periodMs / 1000} s × ${c.ticks}`,
        `${c.runs}/${row.jobs * c.ticks}`,
        String(c.duplicates),
        String(c.missing),
        fig(c.fireToStart.p50),
        fig(c.fireToStart.p99),
        fig(c.fireToStart.max),
        fig(c.lastStartMs.max),
        fig(c.storeOpsPerTick),
        fig(c.serverOpsPerTick),
        fig(c.serverCpuMsPerTick),
        fig(c.clientCpuPerRunUs),
        ratioCell(c, (r) => r.p99),
        ratioCell(c, (r) => r.storeOpsPerTick),
        ratioCell(c, (r) => r.serverCpuMsPerTick),
      ])
    }
  }
  return markdownTable(
    [
      'store',
      'replicas × jobs',
      'contender',
      'period × ticks',
      'runs',
      'duplicates',
      'missing',
      'fire→start p50 ms',
      'p99 ms',
      'max ms',
      'last start of a tick, worst, ms',
      'store calls / tick',
      'server ops / tick',
      'server CPU ms / tick',
      'client CPU µs / run',
      'p99 ours/peer',
      'calls ours/peer',
      'server CPU ours/peer',
    ],
    lines,
    [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17],
  )
}

/** Least squares of `y = J × (a + b × R)` over the sizes: the cost per job, and per job and replica. */
export function growthFit(points: readonly { replicas: number; jobs: number; y: number }[]): { a: number; b: number } {
  // Minimise Σ (y − a·J − b·J·R)²: the normal equations of the two columns J and J·R.
  let s11 = 0
  let s12 = 0
  let s22 = 0
  let t1 = 0
  let t2 = 0
  for (const { replicas, jobs, y } of points) {
    if (!Number.isFinite(y)) continue
    const x1 = jobs
    const x2 = jobs * replicas
    s11 += x1 * x1
    s12 += x1 * x2
    s22 += x2 * x2
    t1 += x1 * y
    t2 += x2 * y
  }
  const det = s11 * s22 - s12 * s12
  if (det === 0) return { a: Number.NaN, b: Number.NaN }
  return { a: (t1 * s22 - t2 * s12) / det, b: (s11 * t2 - s12 * t1) / det }
}

/** Where the sizes differ: per store and contender, the fit of store calls and server CPU per tick, and 50 × 5,000 by it. */
export function growthTable(rows: readonly FleetRow[]): string | undefined {
  const sizes = new Set(rows.map((r) => `${r.replicas}x${r.jobs}`))
  if (sizes.size < 3) return undefined
  const keys = [...new Set(rows.flatMap((r) => r.contenders.map((c) => `${r.store}/${c.label}`)))]
  const lines = keys.map((key) => {
    const [store, label] = key.split('/') as [string, string]
    // Only the sizes where every (job, tick) ran once: a saturated fleet sends less, not more.
    const points = rows.flatMap((r) =>
      r.store === store ? r.contenders.filter((c) => c.label === label && complete(c)).map((c) => ({ r, c })) : [],
    )
    const ops = growthFit(points.map(({ r, c }) => ({ replicas: r.replicas, jobs: r.jobs, y: c.storeOpsPerTick })))
    const cpu = growthFit(points.map(({ r, c }) => ({ replicas: r.replicas, jobs: r.jobs, y: c.serverCpuMsPerTick })))
    const at = (fit: { a: number; b: number }): number => 5000 * (fit.a + fit.b * 50)
    const sizes = points.map(({ r }) => `${r.replicas}×${r.jobs}`).join(', ')
    const enough = new Set(points.map(({ r }) => r.replicas)).size >= 2
    const cells = (fit: { a: number; b: number }): string[] =>
      enough ? [fig(fit.a), fig(fit.b), fig(at(fit))] : ['–', '–', '–']
    return [store, label, sizes || 'none', ...cells(ops), ...cells(cpu)]
  })
  return markdownTable(
    [
      'store',
      'contender',
      'sizes fitted (every run once)',
      'store calls per job',
      'per job and replica',
      'calls per tick at 50 × 5,000',
      'server CPU ms per job',
      'per job and replica',
      'server CPU ms per tick at 50 × 5,000',
    ],
    lines,
    [3, 4, 5, 6, 7, 8],
  )
}

/** Every (job, tick) ran, once: the size's figures measure the workload, not a fleet falling behind. */
function complete(c: FleetContender): boolean {
  return c.missing === 0 && c.duplicates === 0 && c.runs > 0
}

/** The Markdown section of the fleet measurement. */
export function fleetSection(rows: readonly FleetRow[]): string {
  if (rows.length === 0) return ''
  const out = ['### 9. Fleet tick', '']
  out.push(
    'R replica processes each schedule the same J jobs; each (job, tick) must run exactly once across them. Latency from the nominal fire time to the task start; store calls counted in the replicas (pg queries, Redis commands); server ops: PostgreSQL transactions of the contender’s own database, Redis commands of the whole server (scripts’ commands included); server CPU from /proc (the database’s backends, or redis-server). Ratios are ours / peer.',
    '',
    fleetTable(rows),
    '',
  )
  for (const row of rows) {
    for (const c of row.contenders) {
      const warm = c.warmupFireToStart
      const notes = [
        c.limits,
        warm
          ? `Its ${c.warmupTicks} warm-up ticks (not counted): fire→start p50 ${fig(warm.p50)}, p99 ${fig(warm.p99)} ms`
          : undefined,
        c.errors.length > 0 ? `errors: ${c.errors.slice(0, 3).join(' | ')}` : undefined,
      ]
      const said = notes.filter((n) => n !== undefined)
      out.push(
        `- ${row.store} ${row.replicas} × ${row.jobs}, ${c.label} (${c.version}): ${c.settings}. Runs per replica ${c.runsPerReplica.join(' / ')}${c.outside > 0 ? `; ${c.outside} runs for fires outside the window` : ''}.${said.length > 0 ? ` ${said.join('. ')}.` : ''}`,
      )
    }
  }
  out.push('')
  const growth = growthTable(rows)
  if (growth) {
    out.push(
      'Growth: a least-squares fit of each figure per tick to J × (a + b × R) over the sizes where every (job, tick) ran once (at least two replica counts), and the extrapolation to 50 replicas × 5,000 jobs by it.',
      '',
      growth,
      '',
    )
  }
  return out.join('\n')
}

const COLORS = ['#2b6cb0', '#c05621', '#2f855a', '#805ad5', '#b83280', '#718096']

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;')
}

/**
 * Two panels, store calls per tick and fire-to-start p99, against the size (R × J, ordered by the
 * attempts per tick, R·J), one line per store and contender, log scale; a self-contained SVG.
 * Returns `undefined` for fewer than three sizes.
 */
export function fleetChart(rows: readonly FleetRow[], title: string): string | undefined {
  const sizes = [...new Map(rows.map((r) => [`${r.replicas}×${r.jobs}`, r])).values()].sort(
    (a, b) => a.replicas * a.jobs - b.replicas * b.jobs || a.jobs - b.jobs,
  )
  if (sizes.length < 3) return undefined
  const series = [...new Set(rows.flatMap((r) => r.contenders.map((c) => `${r.store}: ${c.label}`)))]
  const panelWidth = 360
  const panelHeight = 220
  const left = 60
  const top = 50
  const gap = 80
  const width = left + 2 * panelWidth + gap + 20
  const legendTop = top + panelHeight + 50
  const height = legendTop + Math.ceil(series.length / 3) * 16 + 30
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="18" font-size="13" font-weight="bold">${escapeXml(title)}</text>`,
  ]
  const panels: [string, (c: FleetContender) => number][] = [
    ['store calls per tick (log)', (c) => c.storeOpsPerTick],
    ['fire-to-start p99, ms (log)', (c) => c.fireToStart.p99],
  ]
  panels.forEach(([label, pick], p) => {
    const x0 = left + p * (panelWidth + gap)
    const values = rows.flatMap((r) => r.contenders.map(pick)).filter((v) => Number.isFinite(v) && v > 0)
    if (values.length === 0) return
    const lo = Math.floor(Math.log10(Math.min(...values)))
    const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...values))))
    const y = (v: number): number => top + panelHeight - ((Math.log10(v) - lo) / (hi - lo)) * panelHeight
    const x = (i: number): number => x0 + (i + 0.5) * (panelWidth / sizes.length)
    out.push(`<text x="${x0}" y="${top - 10}" font-weight="bold">${escapeXml(label)}</text>`)
    out.push(`<rect x="${x0}" y="${top}" width="${panelWidth}" height="${panelHeight}" fill="none" stroke="#cbd5e0"/>`)
    for (let e = lo; e <= hi; e++) {
      const yy = y(10 ** e).toFixed(1)
      out.push(`<line x1="${x0}" y1="${yy}" x2="${x0 + panelWidth}" y2="${yy}" stroke="#edf2f7"/>`)
      out.push(`<text x="${x0 - 6}" y="${yy}" text-anchor="end" dy="4">${fig(10 ** e)}</text>`)
    }
    sizes.forEach((s, i) => {
      out.push(
        `<text x="${x(i).toFixed(1)}" y="${top + panelHeight + 14}" text-anchor="middle" font-size="9">${s.replicas}×${s.jobs}</text>`,
      )
    })
    series.forEach((name, n) => {
      const points: string[] = []
      sizes.forEach((s, i) => {
        const row = rows.find((r) => r.replicas === s.replicas && r.jobs === s.jobs && name.startsWith(`${r.store}: `))
        const c = row?.contenders.find((k) => `${row.store}: ${k.label}` === name)
        const v = c && complete(c) ? pick(c) : Number.NaN
        if (Number.isFinite(v) && v > 0) points.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`)
      })
      const color = COLORS[n % COLORS.length]!
      const dash = name.startsWith('redis') ? ' stroke-dasharray="5,3"' : ''
      if (points.length > 1)
        out.push(`<polyline points="${points.join(' ')}" fill="none" stroke="${color}" stroke-width="2"${dash}/>`)
      for (const point of points) {
        const [px, py] = point.split(',')
        out.push(`<circle cx="${px}" cy="${py}" r="2.5" fill="${color}"/>`)
      }
    })
  })
  out.push(
    `<text x="${left}" y="${top + panelHeight + 32}" fill="#4a5568">replicas × jobs, ordered by attempts per tick (R·J); solid: PostgreSQL, dashed: Redis; only sizes where every run ran once</text>`,
  )
  series.forEach((name, n) => {
    const lx = 10 + (n % 3) * 260
    const ly = legendTop + Math.floor(n / 3) * 16
    out.push(`<rect x="${lx}" y="${ly - 9}" width="10" height="10" fill="${COLORS[n % COLORS.length]}"/>`)
    out.push(`<text x="${lx + 14}" y="${ly}">${escapeXml(name)}</text>`)
  })
  out.push('</svg>')
  return `${out.join('\n')}\n`
}
