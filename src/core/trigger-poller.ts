import { debuglog } from 'node:util'
import type { Duration } from './duration.ts'
import type { LockConfiguration, LockConfigurationOptions } from './lock-configuration.ts'
import type { LockInspector, LockRecord } from './lock-inspector.ts'
import { triggerOf, triggerRecordName } from './trigger.ts'
import { type LockedTask, messageOf, type TaskResult } from './task.ts'

const debug = debuglog('shedlock')

/** Options of the executor's trigger poll (`createLockingTaskExecutor(provider, { triggers })`). */
export interface TriggerOptions {
  /**
   * How often the executor looks for `shedlock trigger NAME` requests of the tasks it ran, in
   * milliseconds or a duration string: one inspector read (`get`) per task per poll. A trigger is
   * picked up within this time, plus the wait for the task's lock when a run holds it.
   */
  poll: Duration
}

/**
 * What a triggered run does once it holds the task's lock, before the task starts: `claim()`
 * releases the trigger record it was started for, and only the replica whose release succeeds
 * runs the task (the others find it gone and skip). `by` is who triggered it, for the ledger.
 */
export interface TriggerClaim {
  readonly by: string
  claim(): Promise<boolean>
}

/** Runs a task through its own lock for a trigger: the executor's plain run, with `claim` inside the lock. */
export type RunTriggered = (
  task: LockedTask<unknown>,
  lock: LockConfigurationOptions,
  claim: TriggerClaim,
) => Promise<TaskResult<unknown>>

interface Remembered {
  readonly task: LockedTask<unknown>
  readonly lock: LockConfigurationOptions
}

/**
 * Looks for triggers of the tasks an executor ran (the latest task function and lock options
 * given for each name) every `pollMs`, and runs each one found through `run`. The timer keeps no
 * process alive; a store error in a poll is logged (NODE_DEBUG=shedlock) and the next poll tries
 * again.
 */
export class TriggerPoller {
  readonly #tasks = new Map<string, Remembered>()
  // Tasks whose triggered run is under way here: not started again by the next poll.
  readonly #running = new Set<string>()
  readonly #inspector: () => LockInspector | undefined
  readonly #run: RunTriggered
  readonly #timer: ReturnType<typeof setInterval>
  #polling: Promise<number> | undefined

  constructor(pollMs: number, inspector: () => LockInspector | undefined, run: RunTriggered) {
    this.#inspector = inspector
    this.#run = run
    this.#timer = setInterval(() => void this.poll(), pollMs)
    // Workers and Deno hand out numbers, without unref().
    ;(this.#timer as { unref?: () => unknown }).unref?.()
  }

  /** Remembers `task` with the `lockAtMostFor` of `configuration`, for the triggers of its name (the latest call wins). */
  remember(task: LockedTask<unknown>, configuration: LockConfiguration): void {
    const { name, lockAtMostFor } = configuration
    // No lockAtLeastFor: a replica that takes the lock only to find the trigger claimed releases
    // it at once, instead of holding it (and skipping the next scheduled fire) for that long.
    this.#tasks.set(name, { task, lock: { name, lockAtMostFor } })
  }

  /**
   * One poll: reads the trigger record of every remembered task and starts a run for each one
   * held; resolves to how many it started. A poll still under way is returned, not repeated.
   */
  poll(): Promise<number> {
    this.#polling ??= this.#pollOnce().finally(() => {
      this.#polling = undefined
    })
    return this.#polling
  }

  /** Stops polling; runs already started go on (the executor's close() waits for them). */
  stop(): void {
    clearInterval(this.#timer)
  }

  async #pollOnce(): Promise<number> {
    let inspector: LockInspector | undefined
    try {
      inspector = this.#inspector()
    } catch (error) {
      debug('Triggers not polled: the provider gives no inspector: %s', messageOf(error))
      return 0
    }
    if (!inspector) return 0
    const found = await Promise.all(
      [...this.#tasks].map(async ([name, remembered]) => {
        if (this.#running.has(name)) return 0
        let record: LockRecord | undefined
        try {
          record = await inspector.get(triggerRecordName(name))
        } catch (error) {
          debug('Lock "%s": could not read its trigger, trying again at the next poll: %s', name, messageOf(error))
          return 0
        }
        const by = triggerOf(record)
        if (by === undefined) return 0
        this.#start(name, remembered, inspector, record!, by)
        return 1
      }),
    )
    return found.reduce<number>((sum, one) => sum + one, 0)
  }

  #start(name: string, remembered: Remembered, inspector: LockInspector, record: LockRecord, by: string): void {
    debug('Lock "%s": triggered by %s; running it through its lock', name, by)
    this.#running.add(name)
    // Released only by the replica that holds the task's lock, and only this acquisition of the
    // trigger: of several replicas that found it, one releases it and runs the task.
    const claim: TriggerClaim = {
      by,
      claim: () =>
        inspector.release(record).catch((error: unknown) => {
          debug(
            'Lock "%s": could not release its trigger, not run; the next poll tries again: %s',
            name,
            messageOf(error),
          )
          return false
        }),
    }
    this.#run(remembered.task, remembered.lock, claim)
      .then(
        (result) => {
          if (!result.executed)
            debug(
              'Lock "%s": trigger not run here (%s); it stays for the next poll if no one took it',
              name,
              result.reason,
            )
        },
        (error: unknown) => debug('Lock "%s": triggered run failed: %s', name, messageOf(error)),
      )
      .finally(() => this.#running.delete(name))
  }
}
