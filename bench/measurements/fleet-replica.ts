// One replica of the fleet measurement, started by fleet.ts with a ReplicaPlan as its JSON
// argument. Protocol: prints `ready` once connected and set up; reads the window (one JSON line)
// on stdin, schedules it and prints `started`; prints a run line (`R job slot start`) as each run
// starts; on `stop` stops and prints its ReplicaReport as the last line.
import { createInterface } from 'node:readline'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import pg from 'pg'
import { prepareContender } from './fleet-contenders.ts'
import { BOUNDARY_LEAD_MS, type ReplicaPlan, type ReplicaReport, type ReplicaWindow, runLine } from './fleet-plan.ts'

const plan = JSON.parse(process.argv[2] ?? '') as ReplicaPlan
const errors: string[] = []

// Store calls, counted where every library here sends them: pg's Client#query (Pool#query goes
// through it) and ioredis's Redis#sendCommand (pipelines and scripts too; one EVALSHA is one).
let ops = 0
for (const proto of [pg.Client.prototype, Redis.prototype] as unknown as Record<string, unknown>[]) {
  const method = proto === (pg.Client.prototype as unknown) ? 'query' : 'sendCommand'
  const real = proto[method] as (...args: unknown[]) => unknown
  proto[method] = function (this: unknown, ...args: unknown[]) {
    ops++
    return real.apply(this, args)
  }
}

// Wall-clock time with sub-millisecond resolution (every process reads the same system clock).
const now = (): number => performance.timeOrigin + performance.now()

let pending = ''
const flush = (): void => {
  if (pending === '') return
  process.stdout.write(pending)
  pending = ''
}
const record = (job: number, slot: number): void => {
  if (pending === '') setImmediate(flush)
  pending += runLine(job, slot, now())
}

const contender = await prepareContender(plan, errors)
process.stdout.write('ready\n')

const lines = createInterface({ input: process.stdin })
const opsAtBoundaries: number[] = []
let cpuStart: NodeJS.CpuUsage | undefined
let windowCpuUs = Number.NaN
for await (const line of lines) {
  if (line === 'stop') break
  const window = JSON.parse(line) as ReplicaWindow
  // Snapshots at each tick's boundary, BOUNDARY_LEAD_MS before its fire time, and one after the last tick.
  for (let k = 0; k <= window.ticks; k++) {
    const at = window.firstFire + k * plan.periodMs - BOUNDARY_LEAD_MS
    setTimeout(
      () => {
        opsAtBoundaries[k] = ops
        if (k === window.measureFrom) cpuStart = process.cpuUsage()
        if (k === window.ticks && cpuStart) {
          const used = process.cpuUsage(cpuStart)
          windowCpuUs = used.user + used.system
        }
      },
      Math.max(0, at - Date.now()),
    ).unref()
  }
  await contender.start(window, record)
  process.stdout.write('started\n')
}
flush()
try {
  await contender.stop()
} catch (error) {
  errors.push(`stop: ${String(error)}`)
}
const report: ReplicaReport = { windowCpuUs, opsAtBoundaries, errors: errors.slice(0, 20) }
process.stdout.write(`${JSON.stringify(report)}\n`)
process.exit(0)
