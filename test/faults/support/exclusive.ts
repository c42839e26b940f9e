import { mkdirSync, rmdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { inject } from 'vitest'

/**
 * Runs `fn` while no other fault file runs a part marked `exclusively` too. The suite runs two
 * files at a time (test/faults/vitest.config.ts): most groups wait on kills, restarts and
 * lockAtMostFor, but the soak (8 processes firing 200 times a second) and the slot proofs (nodes
 * firing on a schedule with skewed clocks) keep both cores busy, and two of them at once would
 * measure the machine rather than the stores. The mark is a folder in this run's own temporary
 * directory (global-setup.ts), made atomically with mkdir: it dies with the run.
 */
export async function exclusively<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const mark = join(dirname(inject('faultFiguresFile')), 'exclusive.lock')
  const waitedFrom = Date.now()
  for (;;) {
    try {
      mkdirSync(mark)
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      await sleep(200)
    }
  }
  const waited = Date.now() - waitedFrom
  if (waited > 1_000)
    console.log(`[faults] ${what}: waited ${Math.round(waited / 1000)} s for the other file's exclusive part`)
  try {
    return await fn()
  } finally {
    rmdirSync(mark)
  }
}
