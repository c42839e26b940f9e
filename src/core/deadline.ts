import type { Clock } from './clock.ts'

// The largest delay setTimeout accepts; later deadlines are re-armed in steps.
const MAX_TIMER_MS = 2 ** 31 - 1

/** Stops a deadline from firing; calling it again, or after it fired, does nothing. */
export type CancelDeadline = () => void

/**
 * Calls `fire` once `clock` reaches `at` (epoch ms). The timer is re-armed when it wakes early on
 * `clock` (an injected or skewed clock, or a deadline past setTimeout's 24.8-day limit), and it is
 * unref'd: a deadline never keeps the process alive by itself.
 */
export function atDeadline(at: number, clock: Clock, fire: () => void): CancelDeadline {
  let timer: NodeJS.Timeout | undefined
  const arm = (): void => {
    timer = setTimeout(
      () => {
        if (clock.now() < at) return arm()
        timer = undefined
        fire()
      },
      Math.min(Math.max(at - clock.now(), 0), MAX_TIMER_MS),
    )
    timer.unref()
  }
  arm()
  return () => {
    if (timer) clearTimeout(timer)
    timer = undefined
  }
}

/**
 * Settles like `promise`, or rejects with `expired()` once `clock` reaches `at`, whichever comes
 * first: for calls to a store that may never answer (a partitioned network, a client without a
 * timeout). `promise` itself keeps running.
 */
export function beforeDeadline<T>(promise: Promise<T>, at: number, clock: Clock, expired: () => unknown): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = atDeadline(at, clock, () => reject(expired()))
    promise.then(
      (value) => {
        cancel()
        resolve(value)
      },
      (error: unknown) => {
        cancel()
        reject(error)
      },
    )
  })
}
