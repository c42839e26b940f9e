// What `shedlock demo` and its worker processes share: the task they lock, the hidden command
// that starts a worker, and the messages they exchange over IPC.

/** The lock every demo node asks for. */
export const TASK = { name: 'demo-task', lockAtMostFor: '10s', lockAtLeastFor: '500ms' } as const
/** The hidden command a demo node runs. */
export const WORKER = '__demo-worker'

/** What one node did with one tick. */
export type Outcome = 'ran' | 'skipped' | 'error'

/** What a worker reports for one tick. `startedAt`/`endedAt` (epoch ms) are set when the task ran. */
export interface TickReport {
  type: 'tick'
  node: string
  tick: number
  outcome: Outcome
  startedAt?: number
  endedAt?: number
  error?: string
}

/** A worker to the parent. */
export type WorkerMessage =
  | { type: 'ready'; node: string }
  | TickReport
  | { type: 'fatal'; node: string; error: string }
/** The parent to a worker: the ticks to run (epoch seconds), or stop. */
export type ParentMessage = { type: 'start'; firstTick: number; lastTick: number } | { type: 'stop' }
