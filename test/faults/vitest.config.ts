import { defineConfig } from 'vitest/config'
import { inCI } from '../support/backends.ts'

// The fault suite (`npm run test:faults`): real servers of its own, killed, restarted and cut
// off; child processes as nodes. Files run one at a time: each starts servers and up to eight
// worker processes, and a 2-core machine must not be overloaded into false timing failures.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/faults/support/global-setup.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // In CI a failed fault test runs once more, so that one stall of a shared VM does not fail a
    // 25-minute run; .ci/run lists every test that passed only on its retry. A retry cannot hide
    // a double run: the groups that count them call noDoubleRunInAnyAttempt()
    // (test/support/double-runs.ts).
    retry: inCI ? 1 : 0,
  },
})
