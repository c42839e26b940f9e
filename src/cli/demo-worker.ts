import { setTimeout as sleep } from 'node:timers/promises'
import { createLockingTaskExecutor } from '../core/locking-task-executor.ts'
import { loadSqliteDriver, type SqliteConnection, type SqliteDriverName } from '../providers/sqlite/driver.ts'
import { sqliteLockProvider } from '../providers/sqlite/index.ts'
import { type Command, EXIT_FAILURE, EXIT_OK, parseOptions, UsageError } from './command.ts'
import { type ParentMessage, TASK, WORKER, type WorkerMessage } from './demo-protocol.ts'

// One node of `shedlock demo`: a process that runs the demo task every second, under the lock
// (or without it, with --no-lock), and reports each tick to the parent over IPC.

/** The hidden command each demo node runs, forked by `shedlock demo`. */
export const demoWorkerCommand: Command = {
  name: WORKER,
  summary: 'one node of `shedlock demo` (internal)',
  help: `Usage: shedlock ${WORKER} --db PATH --node NAME --driver DRIVER [--no-lock]\n\nInternal: started by "shedlock demo", which it talks to over IPC.\n`,
  hidden: true,
  run: runWorker,
}

async function runWorker(args: string[]): Promise<number> {
  const values = parseOptions(args, {
    db: { type: 'string' },
    node: { type: 'string' },
    driver: { type: 'string' },
    'no-lock': { type: 'boolean' },
  })
  const { db, node, driver: driverName } = values
  if (
    !process.send ||
    typeof db !== 'string' ||
    typeof node !== 'string' ||
    !['node:sqlite', 'better-sqlite3', 'libsql'].includes(String(driverName))
  ) {
    throw new UsageError(`${WORKER} is internal: "shedlock demo" starts it`)
  }
  const useLock = values['no-lock'] !== true
  // Ctrl-C reaches the whole process group; the parent decides, and tells us to stop.
  process.on('SIGINT', () => {})

  const sends = new Set<Promise<void>>()
  const report = (message: WorkerMessage): void => {
    if (!process.connected) return
    const sent = new Promise<void>((resolve) => process.send!(message, undefined, {}, () => resolve()))
    sends.add(sent)
    void sent.then(() => sends.delete(sent))
  }

  let connection: SqliteConnection
  try {
    connection = (await loadSqliteDriver(driverName as SqliteDriverName)).open(db)
  } catch (error) {
    report({ type: 'fatal', node, error: error instanceof Error ? error.message : String(error) })
    await Promise.all(sends)
    process.disconnect()
    return EXIT_FAILURE
  }
  const executor = createLockingTaskExecutor(sqliteLockProvider({ database: connection, lockedBy: node }))

  // The task: takes 100-300 ms and says which tick (second) it ran for, and when.
  const task = async (tick: number): Promise<{ tick: number; startedAt: number; endedAt: number }> => {
    const startedAt = Date.now()
    await sleep(100 + Math.floor(Math.random() * 201))
    return { tick, startedAt, endedAt: Date.now() }
  }
  const runTick = async (tick: number): Promise<void> => {
    try {
      if (!useLock) {
        report({ type: 'tick', node, outcome: 'ran', ...(await task(tick)) })
        return
      }
      const result = await executor.executeWithLock(() => task(tick), TASK)
      report(
        result.executed
          ? { type: 'tick', node, outcome: 'ran', ...result.result }
          : { type: 'tick', node, tick, outcome: 'skipped' },
      )
    } catch (error) {
      report({
        type: 'tick',
        node,
        tick,
        outcome: 'error',
        error: error instanceof Error ? error.message : String(error),
      })
    }
  }

  const running = new Set<Promise<void>>()
  let timer: NodeJS.Timeout | undefined
  let finish: () => void = () => {}
  const finished = new Promise<void>((resolve) => {
    finish = resolve
  })
  const stop = (): void => {
    clearTimeout(timer)
    finish()
  }
  // A scheduler firing on every wall-clock second, from firstTick to lastTick.
  const schedule = (tick: number, lastTick: number): void => {
    if (tick > lastTick) {
      finish()
      return
    }
    timer = setTimeout(
      () => {
        const run = runTick(tick)
        running.add(run)
        void run.then(() => running.delete(run))
        schedule(tick + 1, lastTick)
      },
      Math.max(0, tick * 1000 - Date.now()),
    )
  }
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'start') schedule(message.firstTick, message.lastTick)
    else stop()
  })
  // The parent is gone (or done with us): stop rather than become an orphan.
  process.on('disconnect', stop)
  report({ type: 'ready', node })

  await finished
  await Promise.all(running)
  await Promise.all(sends)
  connection.close()
  if (process.connected) process.disconnect()
  return EXIT_OK
}
