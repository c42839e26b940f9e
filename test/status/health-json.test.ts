import { describe, expect, it } from 'vitest'
import type { RunRecord } from '../../src/core/run-ledger.ts'
import { healthJson, pauseJson, runJson, statusRowJson } from '../../src/status/health-json.ts'

const run: RunRecord = {
  id: 'r1',
  name: 'report',
  slot: new Date('2030-01-01T00:00:00Z'),
  node: 'n1',
  startedAt: new Date('2030-01-01T00:00:01Z'),
  finishedAt: new Date('2030-01-01T00:00:02.5Z'),
  outcome: 'failed',
  durationMs: 1500,
  error: { type: 'Error', message: 'boom' },
  fencingToken: 2n ** 53n + 1n,
  nextFireAt: new Date('2030-01-01T01:00:00Z'),
}

describe('health JSON', () => {
  it('a run: ISO-8601 UTC times, the fencing token as decimal text, null for what is unknown', () => {
    expect(runJson(run)).toEqual({
      id: 'r1',
      name: 'report',
      slot: '2030-01-01T00:00:00.000Z',
      node: 'n1',
      startedAt: '2030-01-01T00:00:01.000Z',
      finishedAt: '2030-01-01T00:00:02.500Z',
      outcome: 'failed',
      durationMs: 1500,
      error: { type: 'Error', message: 'boom' },
      fencingToken: '9007199254740993',
      nextFireAt: '2030-01-01T01:00:00.000Z',
      triggeredBy: null,
    })
    expect(runJson({ ...run, triggeredBy: 'alice' }).triggeredBy).toBe('alice')
    const running = {
      ...run,
      slot: undefined,
      finishedAt: undefined,
      outcome: 'running',
      durationMs: undefined,
      error: undefined,
      fencingToken: undefined,
      nextFireAt: undefined,
    } as const
    expect(runJson(running)).toMatchObject({
      slot: null,
      finishedAt: null,
      durationMs: null,
      error: null,
      fencingToken: null,
      nextFireAt: null,
    })
  })

  it('a row of the verdict: the health, then its state, maximum age and pause, in the order status --json prints them', () => {
    const task = { name: 'report', lastRun: run, lastSuccess: undefined, lastFailure: run, consecutiveFailures: 1 }
    expect(healthJson(task)).toEqual({
      name: 'report',
      lastRun: runJson(run),
      lastSuccess: null,
      lastFailure: runJson(run),
      consecutiveFailures: 1,
    })
    const row = statusRowJson({ task, state: 'stale', maxAge: 93_600_000 })
    expect(JSON.stringify(row)).toBe(
      JSON.stringify({ ...healthJson(task), state: 'stale', maxAge: '26h', paused: null }),
    )
    expect(statusRowJson({ task, state: 'failing', maxAge: undefined })).toMatchObject({ maxAge: null })
    const pause = { by: 'alice', reason: 'deploy', until: new Date(Date.UTC(2030, 0, 1)) }
    expect(statusRowJson({ task, state: 'ok', maxAge: undefined }, pause).paused).toEqual({
      by: 'alice',
      reason: 'deploy',
      until: '2030-01-01T00:00:00.000Z',
    })
    expect(pauseJson({ by: 'bob', reason: undefined, until: undefined })).toEqual({
      by: 'bob',
      reason: null,
      until: null,
    })
  })
})
