// The benchmark suite: `npm run bench -- [options]` (see USAGE in options.ts).
import { randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus, totalmem, type as osType, release as osRelease } from 'node:os'
import { join, resolve } from 'node:path'
import { p50Chart } from './chart.ts'
import { measureExecutor } from './measurements/executor.ts'
import { measureFleet } from './measurements/fleet.ts'
import type { FleetStore } from './measurements/fleet-plan.ts'
import { measureHerd } from './measurements/herd.ts'
import { measureLibraryCpu } from './measurements/library-cpu.ts'
import { measureSlotTickCpu } from './measurements/slot-cpu.ts'
import { measureMemory } from './measurements/memory.ts'
import { measureOverhead, measureOverheadInProcesses } from './measurements/overhead.ts'
import { measurePeers, measurePeersInProcesses } from './measurements/peers.ts'
import { measureRoundTrips } from './measurements/round-trips.ts'
import { measureScale } from './measurements/scale.ts'
import { type BenchOptions, BenchUsageError, type Measurement, parseBenchArgs, USAGE } from './options.ts'
import { fleetChart, fleetSection } from './fleet-report.ts'
import { formatReport, formatSummary } from './report.ts'
import type { BenchResult } from './result.ts'
import { SETUPS } from './setups/registry.ts'
import type { StoreSetup } from './setups/setup.ts'

// Peers run at these caller counts (a peer that cannot, such as advisory-lock, sits out).
const PEER_CONCURRENCY = [1, 16]
const ROUND_TRIP_SAMPLES = 20

const begun = Date.now()
const progress = (message: string): void => {
  process.stderr.write(`bench [${((Date.now() - begun) / 1000).toFixed(0).padStart(3)} s] ${message}\n`)
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error)).split('\n')[0]!

async function main(args: string[]): Promise<number> {
  let options: BenchOptions
  try {
    options = parseBenchArgs(args)
  } catch (error) {
    if (!(error instanceof BenchUsageError)) throw error
    process.stderr.write(`bench: ${error.message}\n\n${USAGE}`)
    return 2
  }
  if (options.help) {
    process.stdout.write(USAGE)
    return 0
  }

  const runId = `${process.pid.toString(36)}${randomBytes(2).toString('hex')}`
  const started = process.hrtime.bigint()
  const cpu = cpus()
  const result: BenchResult = {
    startedAt: new Date().toISOString(),
    finishedAt: '',
    seconds: 0,
    machine: {
      os: `${osType()} ${osRelease()}`,
      cpu: cpu[0]?.model.trim() ?? 'unknown',
      cores: cpu.length,
      memory: `${(totalmem() / 2 ** 30).toFixed(0)} GiB`,
      node: process.versions.node,
      v8: process.versions.v8,
    },
    settings: { ...options, help: undefined },
    stores: {},
    overhead: [],
    roundTrips: [],
    herd: [],
    scale: [],
    peers: [],
    memory: [],
    errors: [],
  }
  const wants = (m: Measurement): boolean => options.measurements.includes(m)
  const compareOptions = {
    blocks: options.blocks,
    blockMs: options.blockMs,
    warmupOps: options.warmup,
    warmupMs: options.warmupMs,
  }
  const storeMeasurements = options.measurements.filter(
    (m) => m !== 'memory' && m !== 'executor' && m !== 'cpu' && m !== 'fleet',
  )

  // Ctrl-C: remove what the current store holds of this run before leaving.
  let current: StoreSetup | undefined
  process.once('SIGINT', () => {
    progress('interrupted; removing this run’s tables and keys')
    void (current?.close() ?? Promise.resolve()).finally(() => process.exit(130))
  })

  if (storeMeasurements.length > 0) {
    for (const store of options.stores) {
      let setup: StoreSetup
      try {
        setup = await SETUPS[store]({ runId })
      } catch (error) {
        const why = messageOf(error)
        result.stores[store] = { skipped: why }
        progress(`${store}: skipped, ${why}`)
        if (options.storesGiven) result.errors.push({ store, measurement: 'connect', message: why })
        continue
      }
      current = setup
      result.stores[store] = { versions: setup.versions, notes: setup.notes }
      const attempt = async (measurement: Measurement, run: () => Promise<void>): Promise<void> => {
        if (!wants(measurement)) return
        const separate = (measurement === 'overhead' || measurement === 'peers') && options.processes > 1
        progress(`${store}: ${measurement}${separate ? ` in ${options.processes} processes` : ''}`)
        try {
          await run()
        } catch (error) {
          progress(`${store}: ${measurement} failed: ${messageOf(error)}`)
          result.errors.push({ store, measurement, message: messageOf(error) })
        }
      }
      try {
        await attempt('overhead', async () => {
          const rows =
            options.processes > 1
              ? await measureOverheadInProcesses(store, runId, compareOptions, options.concurrency, options.processes)
              : await measureOverhead(setup, runId, compareOptions, options.concurrency)
          result.overhead.push(...rows)
        })
        await attempt(
          'round-trips',
          async () => void result.roundTrips.push(await measureRoundTrips(setup, runId, ROUND_TRIP_SAMPLES)),
        )
        await attempt(
          'herd',
          async () =>
            void result.herd.push(
              await measureHerd(setup, runId, { contenders: options.contenders, rounds: options.rounds }),
            ),
        )
        await attempt(
          'scale',
          async () => void result.scale.push(await measureScale(setup, runId, options.scaleNames, compareOptions)),
        )
        if (setup.peers) {
          await attempt('peers', async () => {
            const rows =
              options.processes > 1
                ? await measurePeersInProcesses(store, runId, compareOptions, PEER_CONCURRENCY, options.processes)
                : await measurePeers(setup, runId, compareOptions, PEER_CONCURRENCY)
            result.peers.push(...rows)
          })
        }
      } finally {
        current = undefined
        await setup.close().catch((error: unknown) => {
          progress(`${store}: cleanup failed: ${messageOf(error)}`)
          result.errors.push({ store, measurement: 'cleanup', message: messageOf(error) })
        })
      }
    }
  }
  if (wants('memory')) {
    progress(`memory: ${options.cycles} cycles in a child process`)
    try {
      result.memory.push(...(await measureMemory(options.cycles)))
    } catch (error) {
      result.errors.push({ store: 'in-memory', measurement: 'memory', message: messageOf(error) })
    }
  }
  if (wants('executor')) {
    progress('executor: executeWithLock against bare lock()+unlock()')
    try {
      result.executor = await measureExecutor(compareOptions)
    } catch (error) {
      result.errors.push({ store: 'in-memory', measurement: 'executor', message: messageOf(error) })
    }
  }

  if (wants('cpu')) {
    progress("cpu: the library's own CPU per operation, without I/O")
    try {
      const ops = Math.max(1000, Math.round(options.cycles / 2))
      result.libraryCpu = [
        ...(await measureLibraryCpu(ops, 6)),
        // A tick is 400 fires: about as many fires per round as the other rows' operations.
        await measureSlotTickCpu(Math.max(5, Math.round(ops / 400)), 6),
      ]
    } catch (error) {
      result.errors.push({ store: 'in-memory', measurement: 'cpu', message: messageOf(error) })
    }
  }

  if (wants('fleet')) {
    const stores = options.stores.filter((s): s is FleetStore => s === 'postgres' || s === 'redis')
    progress(`fleet: ${stores.join(', ')}, ${options.fleet.sizes.map((s) => `${s.replicas}×${s.jobs}`).join(', ')}`)
    result.fleet = await measureFleet(runId, { ...options.fleet, stores }, progress, (store, message) =>
      result.errors.push({ store, measurement: 'fleet', message }),
    )
  }

  result.finishedAt = new Date().toISOString()
  result.seconds = Number(process.hrtime.bigint() - started) / 1e9
  const outDir = resolve(options.out)
  mkdirSync(outDir, { recursive: true })
  const file = join(outDir, `${result.startedAt.replace(/[:.]/g, '-')}.json`)
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`)
  const chart = p50Chart(
    result.overhead,
    `shedlock vs baseline, p50 (Node ${process.versions.node}, ${result.startedAt.slice(0, 10)})`,
  )
  const chartFile = file.replace(/\.json$/, '.p50.svg')
  if (chart) writeFileSync(chartFile, chart)
  const growth = fleetChart(
    result.fleet ?? [],
    `Fleet tick: store work and latency by size (${result.startedAt.slice(0, 10)})`,
  )
  const growthFile = file.replace(/\.json$/, '.fleet.svg')
  if (growth) writeFileSync(growthFile, growth)
  const report = `${formatReport(result)}\n${fleetSection(result.fleet ?? [])}\n### Summary (ratios, for the README)\n\n${formatSummary(result)}\n`
  const reportFile = file.replace(/\.json$/, '.md')
  writeFileSync(reportFile, report)
  process.stdout.write(
    `${report}\nJSON: ${file}\nMarkdown: ${reportFile}\n${chart ? `Chart: ${chartFile}\n` : ''}${growth ? `Fleet chart: ${growthFile}\n` : ''}`,
  )
  return result.errors.length > 0 ? 1 : 0
}

process.exitCode = await main(process.argv.slice(2))
