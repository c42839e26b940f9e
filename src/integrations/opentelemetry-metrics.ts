import type { LockExecution } from '../core/diagnostics.ts'
import type { LockConfiguration } from '../core/lock-configuration.ts'
import type { LockingTaskExecutorListener } from '../core/locking-task-executor.ts'
import type { RunLedger } from '../core/run-ledger.ts'
import type { OpenTelemetryMeterLike } from './opentelemetry-api.ts'
import { errorType, type LockAttributes } from './opentelemetry-attributes.ts'

// The metrics of openTelemetryListener(); its JSDoc lists them.

/** The hooks the metrics record; `openTelemetryListener()` leaves re-entrant calls out. */
export type MetricsHooks = Required<
  Pick<
    LockingTaskExecutorListener,
    | 'onLockAttempt'
    | 'onLockAcquired'
    | 'onLockNotAcquired'
    | 'onLockFailed'
    | 'onTaskStarted'
    | 'onTaskFinished'
    | 'onSlotClaimed'
    | 'onSlotDone'
    | 'onSlotSkipped'
    | 'onSlotOwed'
    | 'onSlotMissed'
    | 'onSlotCaughtUp'
    | 'onLockLost'
  >
>

/** Options of {@link lockMetrics}. */
export interface LockMetricsOptions {
  /** Java ShedLock's Micrometer names (`javaMetricNames`). */
  readonly java: boolean
  readonly lockAttributes: LockAttributes
  readonly runLedger: RunLedger | undefined
}

// Scheduled tasks last from milliseconds to hours; the SDK's default boundaries (0 to 10 000)
// suit milliseconds, not seconds.
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600]

/** Creates the instruments on `meter` and returns the hooks that record on them. */
export function lockMetrics(meter: OpenTelemetryMeterLike, options: LockMetricsOptions): MetricsHooks {
  const { java, lockAttributes } = options
  const { instruments, javaCounters } = createInstruments(meter, java)
  // Runs whose lock was lost while they ran, for the outcome of shedlock.task.runs.
  const lost = new WeakSet<LockExecution>()
  // Epoch milliseconds of each task's last success in this process, for the gauge without a ledger.
  const lastSuccess = new Map<string, number>()
  observeLastSuccess(meter, java, lastSuccess, options.runLedger)
  if (options.runLedger) observeNextFire(meter, java, options.runLedger)
  // Slot runs claimed here and not yet started or skipped.
  const claimed = new WeakSet<LockExecution>()
  const slotOutcome = (configuration: LockConfiguration, execution: LockExecution, outcome: string): void =>
    instruments.slots.add(1, { ...lockAttributes(configuration, execution), 'shedlock.slot.outcome': outcome })

  return {
    onLockAttempt(configuration, execution) {
      javaCounters?.attempts.add(1, lockAttributes(configuration, execution))
    },
    onLockAcquired(configuration, execution) {
      instruments.attempts?.add(1, { ...lockAttributes(configuration, execution), 'shedlock.lock.result': 'acquired' })
      javaCounters?.acquired.add(1, lockAttributes(configuration, execution))
    },
    onLockNotAcquired(configuration, execution) {
      instruments.attempts?.add(1, {
        ...lockAttributes(configuration, execution),
        'shedlock.lock.result': 'not_acquired',
      })
      javaCounters?.notAcquired.add(1, lockAttributes(configuration, execution))
    },
    onLockFailed(configuration, error, execution) {
      instruments.attempts?.add(1, {
        ...lockAttributes(configuration, execution),
        'shedlock.lock.result': 'failed',
        'error.type': errorType(error),
      })
    },
    onTaskStarted(configuration, execution) {
      instruments.active.add(1, lockAttributes(configuration, execution))
      if (claimed.delete(execution)) slotOutcome(configuration, execution, 'run')
    },
    onTaskFinished(configuration, outcome, execution) {
      const attributes = lockAttributes(configuration, execution)
      instruments.active.add(-1, attributes)
      // Java's Timer has lock.name alone: a failed run is one more sample of the same series.
      instruments.duration.record(
        outcome.durationMs / 1000,
        outcome.failed && !java ? { ...attributes, 'error.type': errorType(outcome.error) } : attributes,
      )
      const result = lost.has(execution) ? 'lock_lost' : outcome.failed ? 'failed' : 'ok'
      instruments.runs.add(1, { ...attributes, 'shedlock.run.outcome': result })
      if (!outcome.failed) lastSuccess.set(configuration.name, Date.now())
    },
    onSlotClaimed(_configuration, _slot, execution) {
      claimed.add(execution)
    },
    onSlotDone(configuration, _slot, execution) {
      slotOutcome(configuration, execution, 'done_elsewhere')
    },
    onSlotSkipped(configuration, _slot, execution) {
      claimed.delete(execution)
      slotOutcome(configuration, execution, 'skipped')
    },
    onSlotOwed(configuration, _slot, execution) {
      claimed.delete(execution)
      slotOutcome(configuration, execution, 'owed')
    },
    onSlotMissed(configuration, _slot, execution) {
      slotOutcome(configuration, execution, 'missed')
    },
    onSlotCaughtUp(configuration, _slot, execution) {
      slotOutcome(configuration, execution, 'caught_up')
    },
    onLockLost(configuration, _reason, execution) {
      lost.add(execution)
      instruments.losses.add(1, lockAttributes(configuration, execution))
    },
  }
}

/** The counters, histogram and up-down counter, with Java ShedLock's names or shedlock's own. */
function createInstruments(meter: OpenTelemetryMeterLike, java: boolean) {
  const instruments = {
    attempts: java
      ? undefined
      : meter.createCounter('shedlock.lock.attempts', {
          unit: '{attempt}',
          description:
            'Lock attempts, by result: acquired, not_acquired (another node holds the lock) or failed (the store failed)',
        }),
    losses: meter.createCounter('shedlock.lock.losses', {
      unit: '{loss}',
      description: 'Locks that could no longer be trusted while their task still ran',
    }),
    duration: meter.createHistogram(java ? 'shedlock.execution.duration' : 'shedlock.task.duration', {
      unit: 's',
      description: 'Duration of tasks run under a lock',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    }),
    active: meter.createUpDownCounter(java ? 'shedlock.execution.active' : 'shedlock.task.active', {
      unit: '{task}',
      description: 'Tasks running under a lock in this process',
    }),
    runs: meter.createCounter('shedlock.task.runs', {
      unit: '{run}',
      description: 'Tasks run under a lock, by outcome: ok, failed or lock_lost',
    }),
    slots: meter.createCounter('shedlock.slot.outcomes', {
      unit: '{slot}',
      description:
        'Slot runs, by outcome: run, done_elsewhere, owed (lock held: runs later), skipped (lock held, overlap skip), missed (every node was down) or caught_up (an owed or missed slot ran late)',
    }),
  }
  // Java ShedLock's Micrometer counters (MicrometerLockingTaskExecutorListener), same names.
  const javaCounters = !java
    ? undefined
    : {
        attempts: meter.createCounter('shedlock.lock.attempts', {
          description: 'Lock attempts (Java ShedLock Micrometer name)',
        }),
        acquired: meter.createCounter('shedlock.lock.acquired', {
          description: 'Locks acquired (Java ShedLock Micrometer name)',
        }),
        notAcquired: meter.createCounter('shedlock.lock.not.acquired', {
          description: 'Locks not acquired: held elsewhere (Java ShedLock Micrometer name)',
        }),
      }
  return { instruments, javaCounters }
}

/**
 * The `shedlock.task.last_success` gauge (`@opentelemetry/api` 1.3 and later): the successes in
 * `lastSuccess` (this process's), and those of `runLedger` (every node's) when given.
 */
function observeLastSuccess(
  meter: OpenTelemetryMeterLike,
  java: boolean,
  lastSuccess: ReadonlyMap<string, number>,
  runLedger: RunLedger | undefined,
): void {
  meter
    .createObservableGauge?.('shedlock.task.last_success', {
      unit: 's',
      description: 'When each task last succeeded, in seconds since the epoch',
    })
    .addCallback(async (result) => {
      const seen = new Map(lastSuccess)
      if (runLedger) {
        // A ledger that cannot be read leaves this process's own successes: a gauge callback must not throw.
        const tasks = await runLedger.tasks().catch(() => [])
        for (const task of tasks) {
          const at = task.lastSuccess?.finishedAt ?? task.lastSuccess?.startedAt
          if (at && at.getTime() > (seen.get(task.name) ?? 0)) seen.set(task.name, at.getTime())
        }
      }
      for (const [name, at] of seen)
        result.observe(at / 1000, java ? { 'lock.name': name } : { 'shedlock.lock.name': name })
    })
}

/**
 * The `shedlock.task.next_fire` gauge (with a run ledger): each task's next fire time as its
 * latest run recorded it, in seconds since the epoch, for an alert on
 * `time() - shedlock_task_next_fire_seconds > grace` (the task is overdue: its schedule stopped).
 */
function observeNextFire(meter: OpenTelemetryMeterLike, java: boolean, runLedger: RunLedger): void {
  meter
    .createObservableGauge?.('shedlock.task.next_fire', {
      unit: 's',
      description: "Each task's next fire time as its latest run recorded it, in seconds since the epoch",
    })
    .addCallback(async (result) => {
      // A ledger that cannot be read observes nothing: a gauge callback must not throw.
      for (const task of await runLedger.tasks().catch(() => [])) {
        const next = task.lastRun?.nextFireAt
        if (next && task.lastRun?.outcome !== 'running')
          result.observe(next.getTime() / 1000, java ? { 'lock.name': task.name } : { 'shedlock.lock.name': task.name })
      }
    })
}
