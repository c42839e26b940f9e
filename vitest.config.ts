import { defineConfig } from 'vitest/config'
import { inCI } from './test/helpers/backends.ts'
import { watchdog } from './test/helpers/watchdog.ts'

export default defineConfig({
  // A hung file fails the run within minutes and is named (test/helpers/watchdog.ts). The whole
  // suite takes about 8 min on 2 cores, four files at a time; no healthy file comes near 10 min.
  plugins: [watchdog({ fileSeconds: 600 })],
  test: {
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    // The fault suite and the topology suite have their own configs and commands (npm run
    // test:faults, npm run test:ha): run here, the topologies would fail on this file's timeouts.
    exclude: ['test/faults/**', 'test/ha/**', '**/node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Four files at a time on a 2-core machine: most of the suite's time is spent sleeping on
    // real time (lockAtMostFor, lockAtLeastFor, leases, restarts), not computing. Measured on
    // the 2-core CI machine: 2 workers took 399 s of wall time for 276 s of CPU; 4 took 226 s,
    // with no test slower than its margins (none needed a retry).
    maxWorkers: 4,
    // In CI a failed test runs once more: a whole CI run (three suites, 25 minutes) must not be
    // lost to one stall of a shared VM. `.ci/run` lists every test that passed only on its retry,
    // so a flaky test stays visible. Tests that count double runs never pass on a retry after
    // finding one (test/helpers/double-runs.ts).
    retry: inCI ? 1 : 0,
  },
})
