import { formatDuration } from '../core/duration.ts'
import type { TaskPause } from '../core/pause.ts'
import type { RunRecord, TaskHealth } from '../core/run-ledger.ts'
import type { StatusRow } from './verdict.ts'

/** A run as `shedlock history --json` prints it: times in ISO-8601 UTC, `null` for what is unknown. */
export function runJson(run: RunRecord): Record<string, unknown> {
  return {
    id: run.id,
    name: run.name,
    slot: run.slot === undefined ? null : run.slot.toISOString(),
    node: run.node,
    startedAt: run.startedAt.toISOString(),
    finishedAt: run.finishedAt === undefined ? null : run.finishedAt.toISOString(),
    outcome: run.outcome,
    durationMs: run.durationMs ?? null,
    error: run.error ?? null,
    // Text: JSON numbers lose a bigint's digits past 2^53.
    fencingToken: run.fencingToken === undefined ? null : String(run.fencingToken),
    nextFireAt: run.nextFireAt === undefined ? null : run.nextFireAt.toISOString(),
    triggeredBy: run.triggeredBy ?? null,
  }
}

/** A task's health as `shedlock status --json` and /healthz print it, its runs as {@link runJson}. */
export function healthJson(health: TaskHealth): Record<string, unknown> {
  return {
    name: health.name,
    lastRun: health.lastRun ? runJson(health.lastRun) : null,
    lastSuccess: health.lastSuccess ? runJson(health.lastSuccess) : null,
    lastFailure: health.lastFailure ? runJson(health.lastFailure) : null,
    consecutiveFailures: health.consecutiveFailures,
  }
}

/**
 * A task of the verdict as `shedlock status --json` and /healthz print it: its health, state,
 * maximum age (e.g. "26h", or `null`) and pause (`{ by, reason, until }`, or `null`).
 */
export function statusRowJson({ task, state, maxAge }: StatusRow, pause?: TaskPause): Record<string, unknown> {
  return {
    ...healthJson(task),
    state,
    maxAge: maxAge === undefined ? null : formatDuration(maxAge),
    paused: pauseJson(pause),
  }
}

/** A pause as `--json` outputs and `/healthz` give it: `{ by, reason, until }`, `null` for none. */
export function pauseJson(
  pause: TaskPause | undefined,
): { by: string; reason: string | null; until: string | null } | null {
  if (!pause) return null
  return { by: pause.by, reason: pause.reason ?? null, until: pause.until ? pause.until.toISOString() : null }
}
