import { LockConfigurationError } from '../core/errors.ts'
import type { RunEnd, RunHandle } from '../core/run-ledger.ts'

/**
 * The handle of run `id`, whose `finish()` records its end with `record` once: a second call
 * rejects with `LockConfigurationError` naming `provider`, as the ledgers whose end is a write over
 * the run's start (the stores that could not tell) do.
 */
export function runHandle(provider: string, id: string, record: (end: RunEnd) => Promise<void>): RunHandle {
  let finished = false
  return {
    id,
    finish: async (end) => {
      if (finished)
        throw new LockConfigurationError(
          `${provider}: run ${JSON.stringify(id)} has already finished; finish() records a run's end once`,
        )
      finished = true
      await record(end)
    },
  }
}
