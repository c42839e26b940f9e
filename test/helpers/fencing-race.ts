// The many-process token check of docs/fencing.md, for any store: several node processes (over
// dist/) take, release and abandon locks of a few names, racing, with a short lockAtMostFor so that
// abandoned locks expire and are taken over. Each acquisition is reported with its token and the
// moments (on the machine's monotonic clock, which every process shares) it was asked for and got.
// The check: an acquisition that began after another one of the same name had been granted carries
// a greater token, and no two acquisitions of a name share a token.
import { fileURLToPath } from 'node:url'
import { startNode } from './processes.ts'

/** Options of {@link fencingRace}. */
export interface FencingRaceOptions {
  /**
   * ES module source, run in each process from the repository's root (so `shedlock/<store>`
   * resolves to dist/), that exports `provider`: a LockProvider, or a promise of one. It may also
   * export `close`, an async function called before the process exits. Build dist/ first. Several
   * sources: process `i` runs source `i % sources.length` (say, one client library and another).
   */
  nodeProvider: string | readonly string[]
  /** How many processes race. @default 4 */
  processes?: number
  /** Acquisitions in all, shared out between the processes. @default 1000 */
  acquisitions?: number
  /** How many lock names they race for. @default 4 */
  names?: number
  /** The locks' lockAtMostFor, in ms: how soon an abandoned lock can be taken over. @default 300 */
  lockAtMostForMs?: number
  /** The share of acquisitions abandoned (never released), left to expire. @default 0.03 */
  abandonRate?: number
  /** Kills the processes after this many ms. @default 240000 */
  timeoutMs?: number
}

/** One acquisition, as a process reported it. */
export interface RaceAcquisition {
  readonly name: string
  readonly token: bigint
  /** Monotonic nanoseconds when `lock()` was called. */
  readonly askedAt: bigint
  /** Monotonic nanoseconds when `lock()` resolved with the lock. */
  readonly grantedAt: bigint
  readonly abandoned: boolean
  readonly process: number
}

/** What {@link fencingRace} saw. */
export interface FencingRaceOutcome {
  readonly acquisitions: readonly RaceAcquisition[]
  /** Abandoned acquisitions whose name was later taken by another acquisition: takeovers after expiry. */
  readonly takeovers: number
  /** Pairs that break the contract, described; empty when the tokens are right. */
  readonly violations: readonly string[]
}

const root = fileURLToPath(new URL('../../', import.meta.url))

const body = (index: number, count: number, names: readonly string[], lockAtMostFor: number, abandonRate: number) => `
import { lockConfiguration } from 'shedlock'
import { setTimeout as sleep } from 'node:timers/promises'
const names = ${JSON.stringify(names)}
const lp = await provider
for (let got = 0; got < ${count}; ) {
  const name = names[Math.floor(Math.random() * names.length)]
  const askedAt = process.hrtime.bigint()
  const lock = await lp.lock(lockConfiguration({ name, lockAtMostFor: ${lockAtMostFor}, lockAtLeastFor: 0 }))
  const grantedAt = process.hrtime.bigint()
  if (!lock) {
    await sleep(1 + Math.random() * 3)
    continue
  }
  got++
  const abandoned = Math.random() < ${abandonRate}
  console.log(JSON.stringify({ name, token: String(lock.fencingToken), askedAt: String(askedAt), grantedAt: String(grantedAt), abandoned, process: ${index} }))
  if (!abandoned) await lock.unlock()
}
if (typeof close === 'function') await close()
process.exit(0)
`

/** Runs the race against a real store and checks the tokens; the caller asserts on the outcome. */
export async function fencingRace(options: FencingRaceOptions): Promise<FencingRaceOutcome> {
  const processes = options.processes ?? 4
  const total = options.acquisitions ?? 1000
  const tag = `race-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`
  const names = Array.from({ length: options.names ?? 4 }, (_, i) => `${tag}-${i}`)
  const lockAtMostFor = options.lockAtMostForMs ?? 300
  const abandonRate = options.abandonRate ?? 0.03
  const sources = typeof options.nodeProvider === 'string' ? [options.nodeProvider] : options.nodeProvider
  const nodes = Array.from({ length: processes }, (_, i) => {
    const count = Math.floor(total / processes) + (i < total % processes ? 1 : 0)
    return startNode(
      [
        '--input-type=module',
        '-e',
        `${sources[i % sources.length]}\n${body(i, count, names, lockAtMostFor, abandonRate)}`,
      ],
      { cwd: root, killAfterMs: options.timeoutMs ?? 240_000 },
    )
  })
  const runs = await Promise.all(nodes.map((node) => node.done))
  const acquisitions: RaceAcquisition[] = []
  runs.forEach((run, i) => {
    if (run.code !== 0) {
      throw new Error(
        `race process ${i} ended with ${run.code ?? run.signal}; stderr: ${run.stderr.slice(-2000)}; stdout: ${run.stdout.slice(-500)}`,
      )
    }
    for (const line of run.stdout.split('\n')) {
      if (!line.startsWith('{')) continue
      const row = JSON.parse(line) as Record<string, string | boolean | number>
      if (!/^\d+$/.test(String(row.token))) throw new Error(`process ${i} got a lock without a bigint token: ${line}`)
      acquisitions.push({
        name: String(row.name),
        token: BigInt(String(row.token)),
        askedAt: BigInt(String(row.askedAt)),
        grantedAt: BigInt(String(row.grantedAt)),
        abandoned: row.abandoned === true,
        process: Number(row.process),
      })
    }
  })
  return { acquisitions, takeovers: takeovers(acquisitions), violations: violations(acquisitions) }
}

// Per name, sorted by the moment each was granted: B must carry a greater token than every A
// granted before B was asked for (A happened before B). Overlapping ones may come in either order,
// but never with the same token.
function violations(all: readonly RaceAcquisition[]): string[] {
  const found: string[] = []
  for (const list of byName(all).values()) {
    const seen = new Map<bigint, RaceAcquisition>()
    for (const a of list) {
      const twin = seen.get(a.token)
      if (twin) found.push(`${a.name}: token ${a.token} handed out twice (processes ${twin.process} and ${a.process})`)
      seen.set(a.token, a)
    }
    for (const b of list) {
      for (const a of list) {
        if (a.grantedAt < b.askedAt && !(a.token < b.token)) {
          found.push(
            `${a.name}: token ${b.token} (process ${b.process}) asked for after token ${a.token} (process ${a.process}) was granted`,
          )
        }
      }
    }
  }
  return found.slice(0, 20)
}

function takeovers(all: readonly RaceAcquisition[]): number {
  let count = 0
  for (const list of byName(all).values()) {
    list.forEach((a, i) => {
      if (a.abandoned && i + 1 < list.length) count++
    })
  }
  return count
}

function byName(all: readonly RaceAcquisition[]): Map<string, RaceAcquisition[]> {
  const map = new Map<string, RaceAcquisition[]>()
  for (const a of all) {
    const list = map.get(a.name) ?? []
    list.push(a)
    map.set(a.name, list)
  }
  for (const list of map.values())
    list.sort((x, y) => (x.grantedAt < y.grantedAt ? -1 : x.grantedAt > y.grantedAt ? 1 : 0))
  return map
}
