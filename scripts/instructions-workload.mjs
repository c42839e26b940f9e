// One fixed workload of the instruction-count guard (scripts/instructions.mjs), run under
// callgrind: `node --jitless scripts/instructions-workload.mjs <workload> <ops> [dist]`.
// Everything a run does besides its `ops` operations (start-up, imports, building the provider,
// the warm-up) is the same whatever `ops`, so the guard takes it out by subtracting the count of a
// run with 0 operations. Operations run one after the other, as a scheduler's ticks would.
import { pathToFileURL } from 'node:url'
import { resolve } from 'node:path'

// Runs before the counted operations in every run, `ops` 0 included: the first calls of a
// function compile its bytecode and fill the interpreter's inline caches, a cost paid once per
// process, not per lock.
const WARM_UP = 200
// The slots of workload `slot`: one minute apart from a fixed instant, a fresh slot each operation.
const FIRST_SLOT = Date.UTC(2026, 0, 1)

const [workload, opsText, distArg = 'dist'] = process.argv.slice(2)
const ops = Number(opsText)
if (!Number.isInteger(ops) || ops < 0)
  throw new Error(`instructions-workload: ops must be a whole number, got ${opsText}`)
const dist = pathToFileURL(`${resolve(distArg)}/`)
const load = (path) => import(new URL(path, dist).href)

// A client that answers every command at once, as a resolved promise: what is counted is the
// provider's own work around the round trip, not a driver's or a socket's.
const redisStub = {
  isCluster: false,
  set: () => Promise.resolve('OK'),
  evalsha: () => Promise.resolve(1),
  eval: () => Promise.resolve(1),
}

// A pg Pool that answers at once: the column's length to the provider's one look at
// pg_attribute, one row changed to every lock statement.
const NAME_COLUMN = { rowCount: 1, rows: [{ max_length: 64, type: 'character varying(64)' }] }
const CHANGED = { rowCount: 1, rows: [] }
const pgStub = {
  query: (text) => Promise.resolve(text.includes('pg_attribute') ? NAME_COLUMN : CHANGED),
}

/** Each workload: sets itself up, then returns one operation as an async function of its index. */
const workloads = {
  async execute() {
    const { createLockingTaskExecutor, inMemoryLockProvider } = await load('index.js')
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    return () => executor.executeWithLock(() => {}, { name: 'guard', lockAtMostFor: '10s' })
  },
  async slot() {
    const { createLockingTaskExecutor, inMemoryLockProvider } = await load('index.js')
    const executor = createLockingTaskExecutor(inMemoryLockProvider())
    return (i) =>
      executor.executeWithLock(() => {}, {
        name: 'guard',
        lockAtMostFor: '10s',
        slot: new Date(FIRST_SLOT + i * 60_000),
      })
  },
  async redis() {
    const { lockConfiguration } = await load('index.js')
    const { redisLockProvider } = await load('providers/redis/index.js')
    return acquireAndRelease(redisLockProvider({ client: redisStub, lockedBy: 'guard' }), lockConfiguration)
  },
  async postgres() {
    const { lockConfiguration } = await load('index.js')
    const { postgresLockProvider } = await load('providers/postgres/index.js')
    return acquireAndRelease(postgresLockProvider({ client: pgStub, lockedBy: 'guard' }), lockConfiguration)
  },
}

// A provider's lock() and the handle's unlock(), without the executor: a fresh configuration
// each time, as the executor makes one per call.
function acquireAndRelease(provider, lockConfiguration) {
  return async () => {
    const configuration = lockConfiguration({ name: 'guard', lockAtMostFor: '10s' })
    const lock = await provider.lock(configuration)
    if (lock === undefined) throw new Error('instructions-workload: the stub refused a lock')
    await lock.unlock()
  }
}

const make = workloads[workload]
if (make === undefined) {
  throw new Error(`instructions-workload: no workload ${workload}; one of ${Object.keys(workloads).join(', ')}`)
}
const operation = await make()
// Warm-up slots come after every counted one, so that the counted slots are the same in each run.
for (let i = 0; i < WARM_UP; i++) check(await operation(1_000_000 + i))
// An empty young generation before the counted operations, in the 0-operation run too: where a
// scavenge falls among them then depends on their own allocations only, not on how much start-up
// allocated. Without it, a change that loaded a little more code moved a scavenge into the
// 3,000 operations and counted +2.9 % on redis, with the provider unchanged (the same code at
// 10,000 operations counted the same as before).
globalThis.gc?.()
for (let i = 0; i < ops; i++) check(await operation(i))

// A workload that stopped running its task would count less and pass: it fails instead.
function check(result) {
  if (result?.executed === false)
    throw new Error(`instructions-workload: ${workload} skipped its task (${result.reason})`)
}
