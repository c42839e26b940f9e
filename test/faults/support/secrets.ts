import { inspect } from 'node:util'
import { createLockingTaskExecutor, type LockProviderError } from 'shedlock'
import { expect, it } from 'vitest'
import { recordFigure } from './figures.ts'
import { openNode, type StoreSpec } from './store-clients.mjs'
import { WorkerProcess } from './workers.ts'

/** A connection that carries a password, and what makes its lock attempt fail. */
export interface SecretCase {
  what: string
  spec: StoreSpec
  /** The lock attempt is expected to fail. @default true */
  fails?: boolean
}

/** Every text of an error a user could print or log: message, String(), stack, util.inspect() with its causes. */
function textsOf(error: unknown): string[] {
  if (!(error instanceof Error)) return [String(error)]
  return [error.message, String(error), error.stack ?? '', inspect(error, { depth: 8 })]
}

/**
 * 8. Secrets: for each password-carrying connection of `cases()`, a lock attempt, most of them
 * failing (wrong password, missing table, closed port...). No text of the error (message, stack,
 * `util.inspect` with its causes), of the listener's `onLockFailed`, nor of a process running
 * with `NODE_DEBUG=shedlock` (stdout and stderr) may contain the password. `setup` may start
 * servers; its `close` stops them.
 */
export function secrets(
  store: string,
  password: string,
  setup: () => Promise<{ cases: SecretCase[]; close?: () => Promise<void> }>,
): void {
  it('secrets: no error text, listener error or NODE_DEBUG=shedlock log line contains the connection password', async () => {
    const { cases: list, close } = await setup()
    try {
      await checkSecrets(store, password, list)
    } finally {
      await close?.()
    }
  }, 120_000)
}

async function checkSecrets(store: string, password: string, list: SecretCase[]): Promise<void> {
  let checked = 0
  for (const c of list) {
    const seen: string[] = []
    let node: Awaited<ReturnType<typeof openNode>> | undefined
    let outcome: unknown
    try {
      node = await openNode(c.spec, { timeoutMs: 1_500 })
    } catch (error) {
      // The driver refused to connect at all (NATS checks credentials on connect).
      outcome = error
    }
    if (node) {
      const executor = createLockingTaskExecutor(node.provider, {
        listener: { onLockFailed: (_, error: LockProviderError) => void seen.push(...textsOf(error)) },
      })
      outcome = await executor
        .executeWithLock(() => {}, { name: `secrets-${store}`, lockAtMostFor: '5s' })
        .catch((e: unknown) => e)
      await node.close()
    }
    seen.push(...textsOf(outcome))
    if (c.fails ?? true) expect(outcome, `${c.what}: the lock attempt was meant to fail`).toBeInstanceOf(Error)
    for (const text of seen) expect(text.includes(password), `${c.what}: the password appears in:\n${text}`).toBe(false)
    checked += seen.length
  }

  const worker = WorkerProcess.start({ mode: 'secrets', specs: list.map((c) => c.spec) }, { NODE_DEBUG: 'shedlock' })
  const report = await worker.next('report', 60_000)
  await worker.exited
  const texts = JSON.stringify(report.texts)
  expect(
    worker.stderr,
    'NODE_DEBUG=shedlock logged nothing, not even the in-memory canary: the log was not on',
  ).toMatch(/SHEDLOCK \d+:.*secrets-canary/)
  for (const [what, text] of [
    ['stderr (NODE_DEBUG=shedlock)', worker.stderr],
    ['stdout', worker.stdout],
    ['errors in the worker', texts],
  ] as const) {
    expect(text.includes(password), `the password appears in the worker's ${what}:\n${text}`).toBe(false)
  }
  recordFigure({
    store,
    group: 'secrets',
    faults: list.length * 2,
    note: `${list.length} failing password-bearing connections (${list.map((c) => c.what).join('; ')}): ${checked} error texts and ${worker.stderr.split('\n').length} debug log lines, no password`,
  })
}
