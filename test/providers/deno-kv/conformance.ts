// The conformance and inspector suites of shedlock/deno-kv, run by Deno itself (the vitest file
// next to this one spawns it):
//
//   deno run -A --unstable-kv test/providers/deno-kv/conformance.ts [KV_PATH]
//
// It imports the built package (npm run build first), as a Deno app would, opens a Deno KV on
// KV_PATH (a fresh file, or memory), runs every case one after another, prints one line per case
// and exits 1 when any failed.
import {
  denoKvLockInspector,
  denoKvLockProvider,
  type DenoKvLockDatabase,
} from '../../../dist/providers/deno-kv/index.js'
import { lockInspectorSuite, lockProviderSuite } from '../../../dist/testing/index.js'

/** The parts of Deno's API used here (this file is type-checked with Node's types too). */
interface DenoApi {
  openKv(path?: string): Promise<DenoKvLockDatabase & { delete(key: readonly unknown[]): Promise<void>; close(): void }>
  args: string[]
  exit(code: number): never
}
const Deno = (globalThis as unknown as { Deno: DenoApi }).Deno

const path = Deno.args[0] ?? ':memory:'
const kv = await Deno.openKv(path)
// With a file, "nodes" alternate between two handles on it, as two processes would share it.
const handles = path === ':memory:' ? [kv] : [kv, await Deno.openKv(path)]
let nodes = 0
const prefix = 'shedlock'

const cases: { name: string; skip?: string | undefined; timeoutMs: number; run(): Promise<void> }[] = [
  ...lockProviderSuite({
    provider: () => denoKvLockProvider({ kv: handles[nodes++ % handles.length]! }),
    isLocked: async (name) => {
      const { value } = await kv.get([prefix, name])
      const until = (value as { lockUntil?: unknown } | null)?.lockUntil
      return until instanceof Date && until.getTime() > Date.now()
    },
    deleteRecord: (name) => kv.delete([prefix, name]),
    unreachableProvider: async () => {
      const closed = await Deno.openKv(':memory:')
      closed.close()
      return denoKvLockProvider({ kv: closed })
    },
    // The key [prefix, name] holds at most 2048 bytes: 10 for "shedlock", 2 around the name.
    maxNameLength: 2048 - 10 - 2,
    extensible: true,
    fencing: true,
    slots: { inspector: true },
    fuzzIterations: 10,
    // Deno KV has no paired acquisition (the declaration is still checked): its cases would only
    // count as skipped, and this runner allows none.
  }).filter((c) => !c.name.startsWith('slots: paired:')),
  ...lockInspectorSuite({ provider: () => denoKvLockProvider({ kv }), inspector: denoKvLockInspector({ kv }) }).map(
    (c) => ({
      ...c,
      name: `inspector ${c.name}`,
      skip: undefined,
    }),
  ),
]

// A process that closes its KV (it stops, or restarts) leaves its lock held in the file: a new
// handle on the file sees it, and takes it once it expired.
if (path !== ':memory:') {
  cases.push({
    name: 'restart: a lock held when its KV handle closes stays held for a new handle on the file until it expires',
    timeoutMs: 10_000,
    run: async () => {
      const { lockConfiguration, LockProviderError } = await import('../../../dist/index.js')
      const name = `restart-${crypto.randomUUID()}`
      const gone = await Deno.openKv(path)
      const lock = await denoKvLockProvider({ kv: gone }).lock(lockConfiguration({ name, lockAtMostFor: 1_000 }))
      if (!lock) throw new Error('expected to acquire')
      gone.close()
      const fresh = await Deno.openKv(path)
      try {
        if (await denoKvLockProvider({ kv: fresh }).lock(lockConfiguration({ name, lockAtMostFor: 60_000 })))
          throw new Error('a new handle took a held lock')
        const failed = await lock.unlock().then(
          () => undefined,
          (error: unknown) => error,
        )
        if (!(failed instanceof LockProviderError))
          throw new Error(`the closed handle's unlock should reject with LockProviderError, got ${String(failed)}`)
        await new Promise((resolve) => setTimeout(resolve, 1_100))
        const next = await denoKvLockProvider({ kv: fresh }).lock(lockConfiguration({ name, lockAtMostFor: 60_000 }))
        if (!next) throw new Error('the expired lock was not taken over')
        await next.unlock()
      } finally {
        fresh.close()
      }
    },
  })
}

// expireAfter adds expireIn to every write. Local KV deletes expired keys in a sweep of its own
// (not within seconds), so the deletion itself is not awaited here: the writes are.
cases.push({
  name: 'expireAfter: acquire, extend and release write with expireIn, and the lock works as without',
  timeoutMs: 10_000,
  run: async () => {
    const { lockConfiguration } = await import('../../../dist/index.js')
    const name = `expire-${crypto.randomUUID()}`
    const provider = denoKvLockProvider({ kv, expireAfter: '1h' })
    const lock = await provider.lock(lockConfiguration({ name, lockAtMostFor: 60_000 }))
    if (!lock || !('extend' in lock)) throw new Error('expected an extensible lock')
    if (await denoKvLockProvider({ kv }).lock(lockConfiguration({ name, lockAtMostFor: 60_000 })))
      throw new Error('another node took a held lock')
    const extended = await (
      lock as { extend(a: number, b: number): Promise<{ unlock(): Promise<void> } | undefined> }
    ).extend(120_000, 0)
    if (!extended) throw new Error('the extension failed')
    await extended.unlock()
    const next = await denoKvLockProvider({ kv }).lock(lockConfiguration({ name, lockAtMostFor: 60_000 }))
    if (!next) throw new Error('the released lock was not free')
    await next.unlock()
  },
})

const started = Date.now()
let failed = 0
let skipped = 0
for (const c of cases) {
  if (c.skip) {
    skipped++
    console.log(`skip ${c.name} (${c.skip})`)
    continue
  }
  const t0 = Date.now()
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    await Promise.race([
      c.run(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${c.timeoutMs} ms`)), c.timeoutMs)
      }),
    ])
    console.log(`ok   ${c.name} (${Date.now() - t0} ms)`)
  } catch (error) {
    failed++
    console.log(`FAIL ${c.name}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  } finally {
    clearTimeout(timer)
  }
}
console.log(
  `deno-kv: ${cases.length - failed - skipped} passed, ${failed} failed, ${skipped} skipped in ${Date.now() - started} ms`,
)
for (const handle of handles) handle.close()
Deno.exit(failed > 0 ? 1 : 0)
