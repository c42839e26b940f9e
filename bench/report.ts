import type { ContenderResult } from './harness.ts'
import type { BenchResult, CallCount, HerdRow, OverheadRow, RoundTripRow } from './result.ts'

/** The p50 ratio goal of the overhead measurement: ours at most 10 % above the baseline. */
export const OVERHEAD_GOAL = 1.1
/** The scale goal: 10,000 names at most 20 % slower than 10. */
export const SCALE_GOAL = 1.2

/** A latency in microseconds, with a unit that keeps three significant digits: `850 ns`, `12.3 µs`, `1.25 ms`; a difference below 0 gets a minus sign: `−10.5 µs`. */
export function formatLatency(us: number): string {
  if (!Number.isFinite(us)) return '–'
  if (us < 0) return `−${formatLatency(-us)}`
  if (us < 1) return `${Math.round(us * 1000)} ns`
  if (us < 1000) return `${significant(us)} µs`
  if (us < 1_000_000) return `${significant(us / 1000)} ms`
  return `${significant(us / 1_000_000)} s`
}

/** Three significant digits, without exponent notation. */
function significant(value: number): string {
  if (value >= 100) return value.toFixed(0)
  if (value >= 10) return value.toFixed(1)
  return value.toFixed(2)
}

/** A ratio with two decimals; `–` for NaN. */
export function formatRatio(value: number): string {
  return Number.isFinite(value) ? value.toFixed(2) : '–'
}

/** Operations per second: `950`, `12.3k`, `1.25M`. */
export function formatRate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return '–'
  if (perSecond < 1000) return perSecond.toFixed(0)
  if (perSecond < 1_000_000) return `${significant(perSecond / 1000)}k`
  return `${significant(perSecond / 1_000_000)}M`
}

/** A byte count with its sign: `+1.2 KiB`, `-512 B`, `+3.40 MiB`. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return '–'
  const sign = bytes < 0 ? '-' : '+'
  const size = Math.abs(bytes)
  if (size < 1024) return `${sign}${Math.round(size)} B`
  if (size < 1024 * 1024) return `${sign}${significant(size / 1024)} KiB`
  return `${sign}${significant(size / 1024 / 1024)} MiB`
}

/** `✓` or `✗` for a goal; `–` when there is nothing to judge. */
export function verdict(ok: boolean | undefined): string {
  return ok === undefined ? '–' : ok ? '✓' : '✗'
}

/**
 * A Markdown table. Cells are escaped (`|` would end a cell); columns whose index is in
 * `right` are right-aligned (numbers), the others left-aligned.
 */
export function markdownTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  right: readonly number[] = [],
): string {
  const escapeCell = (cell: string): string => cell.replaceAll('|', '\\|').replaceAll('\n', ' ')
  const line = (cells: readonly string[]): string => `| ${cells.map(escapeCell).join(' | ')} |`
  const rule = headers.map((_, i) => (right.includes(i) ? '---:' : '---'))
  return [line(headers), `| ${rule.join(' | ')} |`, ...rows.map((r) => line(headers.map((_, i) => r[i] ?? '')))].join(
    '\n',
  )
}

function meanAndMax(count: CallCount): string {
  return `${Number.isInteger(count.mean) ? count.mean : count.mean.toFixed(2)}, ${count.max}`
}

function calls(count: CallCount): string {
  const methods = Object.entries(count.methods)
    .map(([method, n]) => (n === 1 ? method : `${n}× ${method}`))
    .join(' + ')
  const mean = Number.isInteger(count.mean) ? String(count.mean) : count.mean.toFixed(2)
  return methods ? `${mean} (${methods})` : mean
}

/** Client CPU added per operation (µs): the row's median over its processes, or ours − baseline. */
function addedCpu(r: OverheadRow): number {
  return r.addedCpuUs ?? r.ours.cpuPerOpUs - r.baseline.cpuPerOpUs
}

/** Each process's value of one ratio, `1.02 / 1.08 / 0.99`; empty for a row of one process. */
function perProcess<R>(r: { readonly processes?: readonly R[] }, pick: (ratios: R) => number): string {
  return r.processes && r.processes.length > 1 ? r.processes.map((p) => formatRatio(pick(p))).join(' / ') : ''
}

function overheadTable(rows: readonly OverheadRow[]): string {
  const several = rows.some((r) => (r.processes?.length ?? 0) > 1)
  return markdownTable(
    [
      'store',
      'callers',
      'ops/block',
      'p50 ours',
      'p50 baseline',
      'p50 ratio',
      'p99 ours',
      'p99 baseline',
      'p99 ratio',
      'ops/s ours',
      'ops/s baseline',
      'ops/s ratio',
      `p50 ≤ ${OVERHEAD_GOAL.toFixed(2)}`,
      ...(several ? ['p50 ratio per process'] : []),
    ],
    rows.map((r) => [
      r.store,
      String(r.concurrency),
      String(r.opsPerBlock),
      formatLatency(r.ours.latency.p50),
      formatLatency(r.baseline.latency.p50),
      formatRatio(r.p50Ratio),
      formatLatency(r.ours.latency.p99),
      formatLatency(r.baseline.latency.p99),
      formatRatio(r.p99Ratio),
      formatRate(r.ours.opsPerSecond),
      formatRate(r.baseline.opsPerSecond),
      formatRatio(r.opsRatio),
      verdict(Number.isFinite(r.p50Ratio) ? r.p50Ratio <= OVERHEAD_GOAL : undefined),
      ...(several ? [perProcess(r, (p) => p.p50Ratio)] : []),
    ]),
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
  )
}

/** Client CPU per acquire + release, ours against the baseline: the library's own cost, steady on a loaded machine. */
function cpuTable(rows: readonly OverheadRow[]): string {
  const several = rows.some((r) => (r.processes?.length ?? 0) > 1)
  return markdownTable(
    [
      'store',
      'callers',
      'CPU/op ours',
      'CPU/op baseline',
      'ratio',
      'added per op',
      ...(several ? ['ratio per process'] : []),
    ],
    rows.map((r) => [
      r.store,
      String(r.concurrency),
      formatLatency(r.ours.cpuPerOpUs),
      formatLatency(r.baseline.cpuPerOpUs),
      formatRatio(r.cpuRatio),
      formatLatency(addedCpu(r)),
      ...(several ? [perProcess(r, (p) => p.cpuRatio)] : []),
    ]),
    [1, 2, 3, 4, 5],
  )
}

function roundTripTable(rows: readonly RoundTripRow[]): string {
  return markdownTable(
    ['store', 'acquire: ours', 'baseline', 'release: ours', 'baseline', 'losing acquire: ours', 'baseline'],
    rows.map((r) => [
      r.store,
      calls(r.ours.acquire),
      calls(r.baseline.acquire),
      calls(r.ours.release),
      calls(r.baseline.release),
      calls(r.ours.losingAcquire),
      calls(r.baseline.losingAcquire),
    ]),
  )
}

function herdTable(rows: readonly HerdRow[]): string {
  return markdownTable(
    [
      'store',
      'contenders',
      'rounds',
      'one winner',
      'no winner',
      'several',
      'failed calls',
      'all losers know p50',
      'p99',
      'winner knows p50',
      'calls per loser (max)',
    ],
    rows.map((r) => [
      r.store,
      String(r.contenders),
      String(r.rounds),
      String(r.exactlyOneWinner),
      String(r.noWinner),
      String(r.severalWinners),
      r.failures === 0 ? '0' : `${r.failures} (${r.firstFailure ?? ''})`,
      formatLatency(r.allLosersKnow.p50),
      formatLatency(r.allLosersKnow.p99),
      formatLatency(r.winnerKnows.p50),
      `${r.loserCalls.mean.toFixed(2)} (${r.loserCalls.max})`,
    ]),
    [1, 2, 3, 4, 5, 7, 8, 9],
  )
}

function contenderCells(c: ContenderResult): string[] {
  return [formatLatency(c.latency.p50), formatLatency(c.latency.p99), formatRate(c.opsPerSecond)]
}

/** The full report: method, then one table per measurement (absolute figures and ratios). */
export function formatReport(result: BenchResult): string {
  const out: string[] = []
  out.push('## Benchmark results', '')
  out.push(...methodLines(result), '')

  if (result.overhead.length > 0) {
    out.push('### 1. Overhead against the limit', '')
    out.push(
      'Acquire + release, each caller on its own name. Baseline: the same statements or commands sent straight through the same client. Ratios are ours / baseline.',
      '',
    )
    out.push(overheadTable(result.overhead), '')
    out.push(
      "Client CPU time (user + system, from process.cpuUsage() around each measured block) per acquire + release: the figure to drive down, since it does not scatter with the load of the machine the way latency does. It includes the driver's work, the same on both sides.",
      '',
    )
    out.push(cpuTable(result.overhead), '')
  }
  if (result.roundTrips.length > 0) {
    out.push('### 2. Round trips', '')
    out.push(
      'Store calls per operation, counted by a proxy around the client (mean over the samples; the methods of the last one).',
      '',
    )
    out.push(roundTripTable(result.roundTrips), '')
    const slotRows = result.roundTrips.filter((r) => r.slotRun)
    if (slotRows.length > 0) {
      out.push(
        "A slot run through the executor with the store's run ledger (claim, lock, release, and the run's one ledger write, as a run shorter than the executor's recordRunningAfter is written): store calls of the node that runs the slot, and of a node that finds it done. Goal: at most 4 and 1. Housekeeping: the ledger's deletes of old runs, on a timer apart from the runs (a task's rows every tenth write of it, and every task's expired rows every 10 minutes), counted after the last run.",
        '',
        markdownTable(
          ['store', 'slot run: winner (mean, max)', 'loser (mean, max)', 'housekeeping (calls / runs)'],
          slotRows.map((r) => {
            const h = r.slotRun!.housekeeping
            return [
              r.store,
              meanAndMax(r.slotRun!.winner),
              meanAndMax(r.slotRun!.loser),
              h ? `${h.calls} / ${h.runs}` : '–',
            ]
          }),
          [1, 2, 3],
        ),
        '',
      )
    }
  }
  const pollRows = result.roundTrips.filter((r) => r.triggerPoll)
  if (pollRows.length > 0) {
    out.push(
      "A poll for triggers (`createLockingTaskExecutor(provider, { triggers: { poll } })`) by a replica whose executor ran 20 tasks, none triggered: store calls per poll, process CPU per poll (library and driver), and what a 10 s poll costs one replica per minute. SQLite's counter counts writes only: its reads are in-process (no round trip), one SELECT per task all the same.",
      '',
      markdownTable(
        ['store', 'calls per poll (mean, max)', 'per task', 'CPU per poll', 'calls per replica-minute (10 s poll)'],
        pollRows.map((r) => {
          const p = r.triggerPoll!
          return [
            r.store,
            meanAndMax(p.calls),
            (p.calls.mean / p.tasks).toFixed(2),
            `${Math.round(p.cpuUs)} µs`,
            String(Math.round(p.calls.mean * 6)),
          ]
        }),
        [1, 2, 3, 4],
      ),
      '',
    )
  }
  if (result.herd.length > 0) {
    out.push('### 3. Herd', '')
    out.push(
      'Contenders on separate connections race for one fresh name at the same instant. Times are from the release of the gate.',
      '',
    )
    out.push(herdTable(result.herd), '')
  }
  if (result.scale.length > 0) {
    out.push('### 4. Scale', '')
    out.push('Acquire + release (one caller) with many names in the store against 10. Ratios are many / 10.', '')
    out.push(
      markdownTable(
        [
          'store',
          'spaces',
          'p50 (10)',
          'p50 (many)',
          'p50 ratio',
          'p99 (10)',
          'p99 (many)',
          'p99 ratio',
          `p50 ≤ ${SCALE_GOAL}`,
        ],
        result.scale.map((r) => [
          r.store,
          r.mode === 'separate' ? `separate, 10 / ${r.largeNames}` : `one keyspace, 10 / ${r.largeNames}`,
          formatLatency(r.small.latency.p50),
          formatLatency(r.large.latency.p50),
          formatRatio(r.p50Ratio),
          formatLatency(r.small.latency.p99),
          formatLatency(r.large.latency.p99),
          formatRatio(r.p99Ratio),
          verdict(Number.isFinite(r.p50Ratio) ? r.p50Ratio <= SCALE_GOAL : undefined),
        ]),
        [2, 3, 4, 5, 6, 7],
      ),
      '',
    )
  }
  if (result.peers.length > 0) {
    out.push('### 5. Peers', '')
    out.push(
      'Uncontended acquire + release on the same server (and client, where the library takes one). Ratios are ours / peer: below 1 is faster for latency, above 1 for ops/s; as fast means both.',
      '',
    )
    const several = result.peers.some((r) => r.peers.some((p) => (p.processes?.length ?? 0) > 1))
    const rows: string[][] = []
    for (const r of result.peers) {
      rows.push([r.store, String(r.concurrency), 'shedlock', ...contenderCells(r.ours), '', '', '', ''])
      for (const p of r.peers) {
        rows.push([
          r.store,
          String(r.concurrency),
          p.description,
          ...contenderCells(p.result),
          formatRatio(p.p50Ratio),
          formatRatio(p.p99Ratio),
          formatRatio(p.opsRatio),
          verdict(Number.isFinite(p.p50Ratio) ? p.p50Ratio <= 1 && !(p.opsRatio < 1) : undefined),
          ...(several ? [perProcess(p, (x) => x.p50Ratio), perProcess(p, (x) => x.opsRatio)] : []),
        ])
      }
    }
    out.push(
      markdownTable(
        [
          'store',
          'callers',
          'library',
          'p50',
          'p99',
          'ops/s',
          'p50 ours/peer',
          'p99 ours/peer',
          'ops/s ours/peer',
          'as fast',
          ...(several ? ['p50 ratio per process', 'ops/s ratio per process'] : []),
        ],
        rows,
        [1, 3, 4, 5, 6, 7, 8],
      ),
      '',
    )
    if (several) {
      out.push(
        "Each peer's ratios are the medians over the processes; its absolute figures, and shedlock's, are from the process with the median p50 ratio (for shedlock, that against the first peer).",
        '',
      )
    }
  }
  if (result.memory.length > 0) {
    out.push('### 6. Memory', '')
    out.push(
      'executeWithLock cycles on the in-memory provider (100 names in turn, every listener hook set), in a child process; heap after forced GC.',
      '',
    )
    out.push(
      markdownTable(
        [
          'variant',
          'cycles',
          'seconds',
          'heap before',
          'growth, first half',
          'growth, second half',
          'growth, total',
          'per cycle',
          'timers left',
          'process listeners left',
        ],
        result.memory.map((m) => [
          m.variant,
          String(m.cycles),
          m.seconds.toFixed(1),
          `${(m.heapBefore / 1024 / 1024).toFixed(2)} MiB`,
          formatBytes(m.heapMiddle - m.heapBefore),
          formatBytes(m.heapAfter - m.heapMiddle),
          formatBytes(m.growthBytes),
          `${m.growthPerCycle.toFixed(2)} B`,
          String(m.timersLeft),
          String(m.processListenersLeft),
        ]),
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
      ),
      '',
      "A leak grows the heap in both halves alike; one-time allocations (code caches, the provider's map of 100 names) show in the first half only.",
      '',
    )
  }
  if (result.executor) {
    const e = result.executor
    out.push('### 7. Executor overhead', '')
    out.push(
      'In-memory provider, one caller. The bare side builds the configuration, locks, runs the task and unlocks; executeWithLock adds the async context, the abort signal and its timer, and listener dispatch.',
      '',
    )
    out.push(
      markdownTable(
        ['', 'p50', 'p99', 'ops/s', 'CPU/op'],
        [
          [e.bare.label, ...contenderCells(e.bare), formatLatency(e.bare.cpuPerOpUs)],
          [e.executor.label, ...contenderCells(e.executor), formatLatency(e.executor.cpuPerOpUs)],
          [
            'ratio',
            formatRatio(e.p50Ratio),
            formatRatio(e.p99Ratio),
            formatRatio(e.executor.opsPerSecond / e.bare.opsPerSecond),
            formatRatio(e.executor.cpuPerOpUs / e.bare.cpuPerOpUs),
          ],
        ],
        [1, 2, 3, 4],
      ),
      '',
      `executeWithLock adds ${formatLatency(e.addedMeanUs)} per execution (mean, from the ops/s of both), ${formatLatency(e.addedCpuUs)} of CPU.`,
      '',
    )
  }
  if (result.libraryCpu && result.libraryCpu.length > 0) {
    out.push("### 8. The library's own CPU", '')
    out.push(
      'CPU per operation (process.cpuUsage()) with no I/O: the in-memory provider, and the Redis provider on a port that answers at once from a Map. One caller (the slot row: a tick of 400 fires in one turn, per fire); median of the rounds, sides alternating.',
      '',
    )
    out.push(
      markdownTable(
        ['ours', 'CPU/op', 'against', 'CPU/op', 'added'],
        result.libraryCpu.map((r) => [
          r.what,
          formatLatency(r.oursCpuPerOpUs),
          r.baseline,
          formatLatency(r.baselineCpuPerOpUs),
          formatLatency(r.addedCpuUs),
        ]),
        [1, 3, 4],
      ),
      '',
    )
  }
  if (result.errors.length > 0) {
    out.push('### Errors', '')
    for (const e of result.errors) out.push(`- ${e.store} / ${e.measurement}: ${e.message}`)
    out.push('')
  }
  return out.join('\n')
}

function methodLines(result: BenchResult): string[] {
  const m = result.machine
  const s = result.settings
  const lines = [
    `Single-machine loopback figures: client and servers share ${m.cores} cores (${m.cpu}), ${m.memory}; ${m.os}; Node ${m.node}. Started ${result.startedAt}, took ${result.seconds.toFixed(0)} s.`,
    `Method: warm-up of ${s.warmup} operations per side, repeated for at least ${s.warmupMs ?? 0} ms, then blocks sized to about ${s.blockMs} ms each, the same operation count for every side, ${s.blocks} blocks per side in alternating order; latency of each operation from process.hrtime.bigint(); p50/p99 by nearest rank. Connections are opened before timing.${Number(s.processes ?? 1) > 1 ? ` Overhead: measured in ${s.processes} fresh processes per store, one after the other; each ratio is the median over them, and the absolute figures are those of the process with the median p50 ratio.` : ''}`,
    '',
    'Stores:',
    '',
  ]
  for (const [store, info] of Object.entries(result.stores)) {
    if (info.skipped) lines.push(`- ${store}: skipped (${info.skipped})`)
    else
      lines.push(
        `- ${store}: ${Object.values(info.versions ?? {}).join('; ')}${info.notes && info.notes.length > 0 ? `. Note: ${info.notes.join('; ')}` : ''}`,
      )
  }
  return lines
}

/**
 * The README's summary: ratios only, one row per store, then the peers and the in-process
 * measurements. Absolute figures depend on the machine; ratios taken in one run on one machine
 * travel better.
 */
export function formatSummary(result: BenchResult): string {
  const stores = [
    ...new Set([...result.overhead, ...result.roundTrips, ...result.herd, ...result.scale].map((r) => r.store)),
  ]
  const concurrencies = [...new Set(result.overhead.map((r) => r.concurrency))].sort((a, b) => a - b)
  const headers = [
    'store',
    ...concurrencies.flatMap((c) => [`p50 ratio, ${c} caller${c === 1 ? '' : 's'}`, `p99 ratio, ${c}`]),
    'calls per acquire / release',
    'herd: one winner',
    'scale p50 ratio',
  ]
  const rows = stores.map((store) => {
    const overhead = concurrencies.flatMap((c) => {
      const r = result.overhead.find((o) => o.store === store && o.concurrency === c)
      return r ? [formatRatio(r.p50Ratio), formatRatio(r.p99Ratio)] : ['–', '–']
    })
    const rt = result.roundTrips.find((r) => r.store === store)
    const herd = result.herd.find((r) => r.store === store)
    const scale = result.scale.find((r) => r.store === store)
    return [
      store,
      ...overhead,
      rt ? `${formatCount(rt.ours.acquire.mean)} / ${formatCount(rt.ours.release.mean)}` : '–',
      herd ? `${herd.exactlyOneWinner}/${herd.rounds}` : '–',
      scale ? formatRatio(scale.p50Ratio) : '–',
    ]
  })
  const out = [markdownTable(headers, rows, headers.map((_, i) => i).slice(1)), '']
  if (result.overhead.length > 0) {
    out.push(
      markdownTable(
        ['store', 'callers', 'client CPU per op, ours / baseline', 'CPU added per op'],
        result.overhead.map((r) => [
          r.store,
          String(r.concurrency),
          formatRatio(r.cpuRatio),
          formatLatency(addedCpu(r)),
        ]),
        [1, 2, 3],
      ),
      '',
    )
  }
  if (result.peers.length > 0) {
    out.push(
      markdownTable(
        ['store', 'peer', 'callers', 'p50 ours/peer', 'ops/s ours/peer'],
        result.peers.flatMap((r) =>
          r.peers.map((p) => [
            r.store,
            p.result.label,
            String(r.concurrency),
            formatRatio(p.p50Ratio),
            formatRatio(p.opsRatio),
          ]),
        ),
        [2, 3, 4],
      ),
      '',
    )
  }
  if (result.executor) {
    out.push(
      `- executeWithLock / bare lock+unlock (in memory): p50 ratio ${formatRatio(result.executor.p50Ratio)}, ${formatLatency(result.executor.addedMeanUs)} added per execution, ${formatLatency(result.executor.addedCpuUs)} of CPU.`,
    )
  }
  for (const r of result.libraryCpu ?? [])
    out.push(`- ${r.what}, without I/O: ${formatLatency(r.addedCpuUs)} of CPU per operation over ${r.baseline}.`)
  for (const m of result.memory) {
    out.push(
      `- Memory, ${m.variant}: ${m.cycles} cycles, heap ${formatBytes(m.growthBytes)} after GC (${m.growthPerCycle.toFixed(2)} B per cycle), ${m.timersLeft} timers and ${m.processListenersLeft} process listeners left.`,
    )
  }
  return out.join('\n')
}

function formatCount(mean: number): string {
  return Number.isInteger(mean) ? String(mean) : mean.toFixed(2)
}
