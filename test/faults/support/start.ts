import { afterAll, afterEach } from 'vitest'
import { connectOrSkip } from '../../helpers/backends.ts'
import type { StoreUnderTest } from './stores.ts'
import { WorkerProcess } from './workers.ts'

/**
 * Starts a store of the suite's own (server, table, namespace), or returns `undefined` after
 * printing why, when it cannot start here and the store is not required (CI requires them all,
 * as for the provider tests). Registers the teardown: workers killed after each test, the store
 * closed after the file.
 */
export async function startOrSkip<T extends StoreUnderTest>(
  store: string,
  start: () => Promise<T>,
): Promise<T | undefined> {
  const sut = await connectOrSkip(
    store,
    "a server of the fault suite's own (see test/faults/support/servers.ts)",
    start,
  )
  afterEach(() => WorkerProcess.killAll())
  afterAll(async () => {
    await WorkerProcess.killAll()
    await sut?.close()
  })
  return sut
}
