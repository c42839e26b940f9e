import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError } from '../../../src/index.ts'
import { datastoreLockProvider, datastoreRunLedger } from '../../../src/providers/datastore/index.ts'
import { retryContention } from '../../../src/providers/datastore/transaction.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { documentLedgerCases } from '../../helpers/document-ledgers.ts'
import { registerRunLedgerSuite } from '../../helpers/register-suite.ts'
import { emulatorOrSkip, unreachableDatastore } from './emulator.ts'

const emulator = await emulatorOrSkip()

// scripts/services.sh starts the emulator with --require_indexes and no index of its own, so every
// query here would fail if it needed an index Datastore does not keep by itself.
describe.skipIf(!emulator)('datastoreRunLedger (the Datastore emulator)', () => {
  const { datastore, namespace } = emulator!
  const taskKey = (name: string, kind = 'shedlock_run') => datastore.key({ namespace, path: [`${kind}_task`, name] })
  // The test's own read of an entity group: the emulator aborts it (10 ABORTED) while a ledger
  // deletes in that group, as the ledger's own reads are; it is sent again, as they are.
  const runsOf = (name: string, kind = 'shedlock_run') =>
    retryContention(
      async () =>
        (await datastore.runQuery(datastore.createQuery(namespace, kind).hasAncestor(taskKey(name, kind))))[0],
    )

  describe('run ledger contract', () => {
    registerRunLedgerSuite(
      runLedgerSuite({
        ledger: datastoreRunLedger({ datastore, keep: 5 }),
        keep: 5,
        provider: () => datastoreLockProvider({ datastore }),
        withMaxAge: (maxAge) => datastoreRunLedger({ datastore, keep: 5, maxAge }),
      }),
    )
  })

  describe('retention', () => {
    // A kind of their own: the contract's ledgers (maxAge 30 days) would sweep the old runs these
    // cases write, and contend with their writes.
    const kind = 'retention_run'
    documentLedgerCases(
      {
        ledger: (options) => datastoreRunLedger({ datastore, kind, ...options }),
        parallelWrites: 1,
        countRuns: async (name) => (await runsOf(name, kind)).length,
        hasTask: async (name) => (await datastore.get(taskKey(name, kind)))[0] !== undefined,
      },
      () => `task/${randomUUID()}`,
    )
  })

  it('runs on an emulator that refuses a query needing a composite index, as Datastore does', async () => {
    // The proof that the cases above need no index rests on this; scripts/services.sh starts it so.
    const query = datastore
      .createQuery(namespace, 'shedlock_run')
      .hasAncestor(taskKey('any'))
      .order('startedAt', { descending: true })
    const error = await datastore.runQuery(query).catch((caught: unknown) => caught)
    expect(error, 'start the emulator with --require_indexes (scripts/services.sh datastore)').toMatchObject({
      code: 9,
    })
  })

  it('stores a task as an entity with its runs in its entity group, no property indexed', async () => {
    const name = `reports/${randomUUID()}`
    const ledger = datastoreRunLedger({ datastore })
    const startedAt = new Date(Date.now() - 5_000)
    const handle = await ledger.start({
      name,
      slot: undefined,
      node: 'node-a',
      startedAt,
      fencingToken: 2n ** 63n - 1n,
      nextFireAt: new Date(Date.now() + 60_000),
    })
    await handle.finish({ finishedAt: new Date(), outcome: 'ok', durationMs: 5_000 })
    const [task] = await datastore.get(taskKey(name))
    expect(task).toMatchObject({ name, lastStartedAt: startedAt })
    const runs = await runsOf(name)
    expect(runs.map((run) => run[datastore.KEY].name)).toEqual([handle.id])
    expect(runs[0]).toMatchObject({
      name,
      node: 'node-a',
      slot: null,
      startedAt,
      outcome: 'ok',
      durationMs: 5000,
      errorType: null,
      fencingToken: '9223372036854775807',
      triggeredBy: null,
    })
    // Unindexed: a query on a property finds nothing, though the entity has it.
    const [byOutcome] = await datastore.runQuery(
      datastore.createQuery(namespace, 'shedlock_run').filter('outcome', '=', 'ok').limit(1),
    )
    expect(byOutcome).toEqual([])
    const [read] = await ledger.history(name)
    expect(read).toMatchObject({ id: handle.id, fencingToken: 2n ** 63n - 1n, outcome: 'ok' })
  })

  it('refuses a missing client and a reserved kind, and names Datastore and the fix when it cannot be reached', async () => {
    expect(() => datastoreRunLedger({ datastore: {} as never })).toThrow(LockConfigurationError)
    expect(() => datastoreRunLedger({ datastore, kind: '__runs__' })).toThrow(/kind must be/)
    const ledger = datastoreRunLedger({ datastore: unreachableDatastore(), timeout: '2s' })
    const error = await ledger
      .record({
        name: 'job',
        slot: undefined,
        node: 'n',
        startedAt: new Date(),
        finishedAt: new Date(),
        outcome: 'ok',
        durationMs: 1,
      })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(LockProviderError)
    expect(String((error as Error).message)).toMatch(/datastore.*job/s)
  })
})
