#!/usr/bin/env node
// The instruction-count guard: a cost check that does not depend on the clock. Each fixed
// workload of scripts/instructions-workload.mjs runs under valgrind's callgrind with
// `node --jitless` against the built package (dist/), once with `ops` operations and once with 0;
// instructions per operation = (count with ops − count with 0) / ops. Each is compared with the
// committed baseline (bench/instructions-baseline.json): more than `tolerance` above it fails.
//
//   node scripts/instructions.mjs                 compare with the baseline (exit 1 on growth)
//   node scripts/instructions.mjs --update        rewrite the baseline with today's counts
//   node scripts/instructions.mjs --repeat        run everything twice, print how far runs differ
//   node scripts/instructions.mjs --only execute,redis --dist /tmp/other/dist --keep /tmp/cg
//
// Timing on a shared machine scatters by 30 % and more; these counts repeat within 0.1 %. Why
// the V8 flags: under --jitless nothing is compiled to machine code (the interpreter runs
// everything, the same way every time); --single-threaded keeps the garbage collector's work on
// the main thread, in a fixed order; fixed seeds keep hash tables and Math.random the same.
// The count depends on the Node version: the baseline says which one it was taken with.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'

const ROOT = resolve(import.meta.dirname, '..')
const WORKLOAD = join(ROOT, 'scripts/instructions-workload.mjs')
const NODE_FLAGS = ['--jitless', '--single-threaded', '--hash-seed=1', '--random-seed=1', '--expose-gc']
/** Operations per counted run: enough that start-up's ±0.1 M instructions is noise (under 0.05 %). */
const OPS = 3000
const TOLERANCE = 0.03
const WORKLOADS = {
  execute: "executeWithLock(() => {}, { name, lockAtMostFor: '10s' }) on the in-memory provider",
  slot: 'executeWithLock() of a fresh slot ({ slot }) on the in-memory provider',
  redis: "redisLockProvider's lock() + unlock() over an ioredis stub that answers at once",
  postgres: "postgresLockProvider's lock() + unlock() over a pg stub that answers at once",
}

const { values: args } = parseArgs({
  options: {
    update: { type: 'boolean', default: false },
    repeat: { type: 'boolean', default: false },
    only: { type: 'string' },
    dist: { type: 'string', default: join(ROOT, 'dist') },
    baseline: { type: 'string', default: join(ROOT, 'bench/instructions-baseline.json') },
    ops: { type: 'string', default: String(OPS) },
    jobs: { type: 'string', default: String(Math.min(2, availableParallelism())) },
    keep: { type: 'string' },
  },
})

// The valgrind runs under way, stopped when one fails.
const children = new Set()
const ops = Number(args.ops)
const names = args.only ? args.only.split(',') : Object.keys(WORKLOADS)
for (const name of names) if (!(name in WORKLOADS)) fail(`no workload ${name}: one of ${Object.keys(WORKLOADS)}`)
if (!Number.isInteger(ops) || ops < 1) fail(`--ops must be a positive whole number, got ${args.ops}`)
const valgrind = spawnSync('valgrind', ['--version'], { encoding: 'utf8' })
if (valgrind.status !== 0) fail('valgrind is not installed: apt-get install valgrind')
try {
  readFileSync(join(args.dist, 'index.js'))
} catch {
  fail(`no built package at ${args.dist}: run npm run build first`)
}

const outDir = args.keep ?? mkdtempSync(join(tmpdir(), 'shedlock-instructions-'))
const started = Date.now()
const rounds = args.repeat ? 2 : 1
// Every run of every round, [workload, ops, round], two at a time on two cores.
const runs = names.flatMap((name) => [0, ops].flatMap((n) => Array.from({ length: rounds }, (_, r) => [name, n, r])))
const counts = new Map(
  await pool(runs, Number(args.jobs), ([name, n, r]) => count(name, n, r)).catch((error) => fail(error.message)),
)

/** Instructions per operation of `name` in round `r`. */
const perOp = (name, r) => (counts.get(`${name} ${ops} ${r}`) - counts.get(`${name} 0 ${r}`)) / ops
const now = Object.fromEntries(names.map((name) => [name, Math.round(perOp(name, 0))]))

if (args.repeat) {
  for (const name of names) {
    const [a, b] = [perOp(name, 0), perOp(name, 1)]
    console.log(`repeat ${name}: ${kilo(a)} and ${kilo(b)} an operation, ${percent(Math.abs(b - a) / a)} apart`)
  }
}

if (args.update) {
  let old = {}
  try {
    old = JSON.parse(readFileSync(args.baseline, 'utf8')).workloads ?? {}
  } catch {}
  const workloads = { ...old }
  for (const name of names) workloads[name] = { instructionsPerOp: now[name], what: WORKLOADS[name] }
  const file = {
    note: 'Instructions per operation counted by scripts/instructions.mjs (callgrind, node --jitless). Raise with `npm run build && node scripts/instructions.mjs --update`, in the commit that explains why.',
    node: process.version,
    valgrind: valgrind.stdout.trim(),
    ops,
    tolerance: TOLERANCE,
    workloads,
  }
  writeFileSync(args.baseline, `${JSON.stringify(file, null, 2)}\n`)
  if (args.keep === undefined) rmSync(outDir, { recursive: true, force: true })
  for (const name of names) console.log(`${name}: ${kilo(now[name])} instructions an operation`)
  console.log(`baseline written: ${args.baseline} (${seconds()})`)
  process.exit(0)
}

const baseline = JSON.parse(readFileSync(args.baseline, 'utf8'))
const tolerance = baseline.tolerance ?? TOLERANCE
if (baseline.node !== process.version) {
  console.log(
    `note: the baseline was counted on Node ${baseline.node}, this is ${process.version}: counts differ between Node versions`,
  )
}
// A count above the tolerance is counted again, and the lower count kept: work that depends on
// time (a timer that fires once more on a machine busy with other jobs) only ever adds
// instructions, and one CI run read the redis workload 3.3 % high that a quiet rerun read 0.1 % low.
const over = names.filter((name) => {
  const before = baseline.workloads?.[name]?.instructionsPerOp
  return before !== undefined && now[name] / before - 1 > tolerance
})
if (over.length > 0) {
  console.log(`counting ${over.join(', ')} again: above the baseline by more than ${percent(tolerance)}`)
  const again = over.flatMap((name) => [0, ops].map((n) => [name, n, 1]))
  for (const [key, value] of await pool(again, Number(args.jobs), ([name, n, r]) => count(name, n, r)).catch((error) =>
    fail(error.message),
  ))
    counts.set(key, value)
  for (const name of over) now[name] = Math.round(Math.min(perOp(name, 0), perOp(name, 1)))
}
if (args.keep === undefined) rmSync(outDir, { recursive: true, force: true })
const grew = []
console.log(`${'workload'.padEnd(10)} ${'baseline'.padStart(10)} ${'now'.padStart(10)} ${'change'.padStart(8)}`)
for (const name of names) {
  const before = baseline.workloads?.[name]?.instructionsPerOp
  if (before === undefined) {
    console.log(`${name.padEnd(10)} ${'none'.padStart(10)} ${kilo(now[name]).padStart(10)}   (not in the baseline)`)
    grew.push(`${name} has no baseline`)
    continue
  }
  const change = now[name] / before - 1
  const verdict = change > tolerance ? '  GREW' : change < -tolerance ? '  (lower: --update to keep the gain)' : ''
  console.log(
    `${name.padEnd(10)} ${kilo(before).padStart(10)} ${kilo(now[name]).padStart(10)} ${signed(change).padStart(8)}${verdict}`,
  )
  if (change > tolerance) {
    grew.push(
      `${name} grew ${signed(change)} (${kilo(before)} -> ${kilo(now[name])} instructions an operation: ${WORKLOADS[name]})`,
    )
  }
}
console.log(`(${ops} operations a run, tolerance ${percent(tolerance)}, ${seconds()})`)
if (grew.length > 0) {
  for (const line of grew) console.error(`instructions: ${line}`)
  console.error(
    'instructions: find the cost (docs/performance.md, "Instruction counts"), or raise the baseline in the same commit and say why: node scripts/instructions.mjs --update',
  )
  process.exit(1)
}

/** Runs `name` with `n` operations under callgrind; resolves to [its key, the instructions counted]. */
function count(name, n, r) {
  const out = join(outDir, `${name}-${n}-${r}.callgrind`)
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      process.execPath,
      ...NODE_FLAGS,
      WORKLOAD,
      name,
      String(n),
      args.dist,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  children.add(child)
  let stderr = ''
  child.stderr.on('data', (chunk) => {
    stderr += chunk
  })
  return new Promise((done, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      children.delete(child)
      const summary = code === 0 ? /^summary: (\d+)$/m.exec(readFileSync(out, 'utf8')) : null
      if (summary === null) {
        const tail = stderr
          .split('\n')
          .filter((l) => !l.startsWith('=='))
          .join('\n')
          .trim()
          .slice(-2000)
        reject(new Error(`instructions: workload ${name} (${n} operations) failed, exit ${code}:\n${tail}`))
      } else done([`${name} ${n} ${r}`, Number(summary[1])])
    })
  })
}

/** Maps `items` through `task`, at most `jobs` at a time, results in the order of `items`. */
async function pool(items, jobs, task) {
  const results = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await task(items[i])
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, jobs) }, worker))
  return results
}

function kilo(n) {
  return `${(n / 1000).toFixed(1)} k`
}
function percent(x) {
  return `${(x * 100).toFixed(2)} %`
}
function signed(x) {
  return `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`
}
function seconds() {
  return `${Math.round((Date.now() - started) / 1000)} s`
}
function fail(message) {
  console.error(`instructions: ${message}`)
  // The other workloads' valgrind runs would go on for a minute after this exit.
  for (const child of children) child.kill()
  process.exit(2)
}
