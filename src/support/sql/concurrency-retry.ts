import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Retries after a concurrency failure (a deadlock, a serialization failure, a lock wait timeout),
 * so that at most `1 + CONCURRENCY_RETRIES` statements run. Java ShedLock retries its unlock up to
 * 10 times; fewer suffice here because each retry waits longer than the one before.
 */
export const CONCURRENCY_RETRIES = 5

/** The pause before retry `retry` (0-based), in ms: `10 * 2^retry`, less up to half of it at random. */
export function concurrencyBackoffMs(retry: number): number {
  const ceiling = 10 * 2 ** retry
  // Jitter: contenders that failed together must not retry together.
  return Math.round(ceiling * (0.5 + Math.random() / 2))
}

/**
 * Runs `attempt`, and runs it again while it throws an error that `isConcurrencyFailure` accepts,
 * at most `retries` more times (pauses of 5–10, 10–20, 20–40, 40–80, 80–160 ms: at most 310 ms in
 * all with the default). Any other error, or the last concurrency failure, is thrown.
 *
 * For release and extend only, which are idempotent and must not be lost to a rolled-back
 * statement: a lost release keeps the lock until `lockAtMostFor`. An acquire that meets a
 * concurrency failure is not retried: another contender is writing the row, so it did not get the
 * lock, which is an answer, not an error.
 */
export function retryConcurrencyFailures<T>(
  attempt: () => Promise<T>,
  isConcurrencyFailure: (error: unknown) => boolean,
  retries: number = CONCURRENCY_RETRIES,
): Promise<T> {
  let first: Promise<T>
  try {
    first = attempt()
  } catch (error) {
    first = Promise.reject(error)
  }
  return retryAfterFirst(first, attempt, isConcurrencyFailure, retries)
}

/**
 * {@link retryConcurrencyFailures} of an attempt the caller already made, `first` its outcome:
 * the first attempt goes out from the caller's own frame. Every frame between the caller and the
 * client costs on each statement where the client records the caller's stack (mysql2's `trace`,
 * on by default: up to 10 frames per query), and the first attempt is the one every release makes.
 */
export function retryAfterFirst<T>(
  first: PromiseLike<T>,
  attempt: () => Promise<T>,
  isConcurrencyFailure: (error: unknown) => boolean,
  retries: number = CONCURRENCY_RETRIES,
): Promise<T> {
  const again = async (error: unknown): Promise<T> => {
    for (let retry = 0; ; retry++) {
      if (retry >= retries || !isConcurrencyFailure(error)) throw error
      await sleep(concurrencyBackoffMs(retry))
      try {
        return await attempt()
      } catch (next) {
        error = next
      }
    }
  }
  return Promise.resolve(first).then(undefined, again)
}
