// Runs in a child process started by measureOverheadInProcesses() (overhead.ts): connects one
// store, measures the overhead, prints the rows as one JSON line and removes what it created.
import { SETUPS } from '../setups/registry.ts'
import { type OverheadChildRequest, measureOverhead } from './overhead.ts'

const request = JSON.parse(process.argv[2] ?? '') as OverheadChildRequest
const setup = await SETUPS[request.store]({ runId: request.runId })
try {
  const rows = await measureOverhead(setup, request.runId, request.options, request.concurrencies)
  process.stdout.write(`${JSON.stringify(rows)}\n`)
} finally {
  await setup.close()
}
