import { defineConfig } from 'vitest/config'

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
    // A failed fault test is a finding: never retried into a pass.
    retry: 0,
  },
})
