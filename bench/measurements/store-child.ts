// Runs in a child process started by inProcesses() (processes.ts): connects one store, takes one
// measurement of it, prints the rows as one JSON line and removes what it created.
import { SETUPS } from '../setups/registry.ts'
import type { StoreChildRequest } from './processes.ts'
import { measureOverhead } from './overhead.ts'
import { measurePeers } from './peers.ts'

const request = JSON.parse(process.argv[2] ?? '') as StoreChildRequest
const setup = await SETUPS[request.store]({ runId: request.runId })
try {
  const measure = request.measurement === 'peers' ? measurePeers : measureOverhead
  const rows = await measure(setup, request.runId, request.options, request.concurrencies)
  process.stdout.write(`${JSON.stringify(rows)}\n`)
} finally {
  await setup.close()
}
