import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import type { SimpleLock } from '../../src/core/lock-provider.ts'
import type { HerdRow } from '../result.ts'
import type { SeparateNode, StoreSetup } from '../setups/setup.ts'
import { inParallel } from '../setups/setup.ts'
import { summarize } from '../stats.ts'

/** Settings of {@link measureHerd}. */
export interface HerdOptions {
  readonly contenders: number
  readonly rounds: number
}

interface Outcome {
  readonly lock: SimpleLock | undefined
  readonly error: unknown
  /** ns after the gate opened. */
  readonly tookNs: bigint
  readonly calls: number
}

/**
 * The herd: `contenders` nodes, each on a connection of its own, wait on one shared promise and
 * race for one fresh name when it resolves. Checks that exactly one wins each round, and times
 * how long the last loser waits for its answer (losers must be told in one round trip, never by
 * waiting or retrying). The connections are opened and warmed before the first round.
 */
export async function measureHerd(setup: StoreSetup, runId: string, options: HerdOptions): Promise<HerdRow> {
  const nodes: SeparateNode[] = []
  try {
    // Opened a few at a time: 32 simultaneous handshakes would only measure the server's accept queue.
    await inParallel(
      Array.from({ length: options.contenders }, (_, i) => i),
      8,
      async () => void nodes.push(await setup.separateNode()),
    )
    // Each node's first lock loads and warms its code paths (prepared statements, scripts, JIT).
    await Promise.all(
      nodes.map(async (node, i) => {
        const lock = await node.provider.lock(
          lockConfiguration({ name: `${runId}-herd-warm-${i}`, lockAtMostFor: 60_000 }),
        )
        await lock?.unlock()
      }),
    )

    let exactlyOneWinner = 0
    let noWinner = 0
    let severalWinners = 0
    let failures = 0
    let firstFailure: string | undefined
    const losersKnow: number[] = []
    const winnerKnows: number[] = []
    const loserCalls: number[] = []
    for (let round = 0; round < options.rounds; round++) {
      const configuration = lockConfiguration({ name: `${runId}-herd-${round}`, lockAtMostFor: 60_000 })
      for (const node of nodes) node.counter.reset()
      let open!: () => void
      const gate = new Promise<void>((resolve) => {
        open = resolve
      })
      let start = 0n
      const races = nodes.map(async (node): Promise<Outcome> => {
        await gate
        let lock: SimpleLock | undefined
        let error: unknown
        try {
          lock = await node.provider.lock(configuration)
        } catch (failure) {
          error = failure ?? new Error('rejected')
        }
        return { lock, error, tookNs: process.hrtime.bigint() - start, calls: node.counter.total }
      })
      start = process.hrtime.bigint()
      open()
      const outcomes = await Promise.all(races)
      const winners = outcomes.filter((o) => o.lock)
      const losers = outcomes.filter((o) => !o.lock && o.error === undefined)
      const failed = outcomes.filter((o) => o.error !== undefined)
      failures += failed.length
      if (failed.length > 0 && firstFailure === undefined)
        firstFailure = String((failed[0]!.error as Error).message ?? failed[0]!.error)
      if (winners.length === 1) exactlyOneWinner++
      else if (winners.length === 0) noWinner++
      else severalWinners++
      if (losers.length > 0)
        losersKnow.push(
          // biome-ignore lint/complexity/useMathMinMax: tookNs is a bigint, which Math.max refuses.
          Number(losers.reduce((max, o) => (o.tookNs > max ? o.tookNs : max), 0n)) / 1000,
        )
      for (const w of winners) winnerKnows.push(Number(w.tookNs) / 1000)
      for (const l of losers) loserCalls.push(l.calls)
      for (const w of winners) await w.lock!.unlock()
    }
    return {
      store: setup.name,
      contenders: options.contenders,
      rounds: options.rounds,
      exactlyOneWinner,
      noWinner,
      severalWinners,
      failures,
      ...(firstFailure === undefined ? {} : { firstFailure }),
      allLosersKnow: summarize(losersKnow.length > 0 ? losersKnow : [Number.NaN]),
      winnerKnows: summarize(winnerKnows.length > 0 ? winnerKnows : [Number.NaN]),
      loserCalls: {
        mean: loserCalls.reduce((a, b) => a + b, 0) / Math.max(1, loserCalls.length),
        max: Math.max(0, ...loserCalls),
      },
    }
  } finally {
    await Promise.all(nodes.map((node) => node.close().catch(() => {})))
  }
}
