import { defineConfig } from 'vitest/config'
import { inCI } from '../helpers/backends.ts'
import { watchdog } from '../helpers/watchdog.ts'

// The fault suite (`npm run test:faults`): real servers of its own, killed, restarted and cut
// off; child processes as nodes. Two files at a time: each file's servers sit on ports and
// folders of its own, and most of a file's time is spent waiting (for a killed server to come
// back, a cut connection to time out, lockAtMostFor to pass): one at a time, a CI run measured
// 14 min of wall time for 6 min of CPU. The two parts that keep both cores busy, the soak and
// the slot proofs, never overlap (support/exclusive.ts), so a 2-core machine is not overloaded
// into false timing failures.
export default defineConfig({
  // A hung file fails the run and is named (test/helpers/watchdog.ts): the whole suite takes
  // about 10 min, two files at a time, so 12 min is beyond any healthy file.
  plugins: [watchdog({ fileSeconds: 720 })],
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/faults/support/global-setup.ts'],
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // In CI a failed fault test runs once more, so that one stall of a shared VM does not fail a
    // 25-minute run; .ci/run lists every test that passed only on its retry. A retry cannot hide
    // a double run: the groups that count them call noDoubleRunInAnyAttempt()
    // (test/helpers/double-runs.ts).
    retry: inCI ? 1 : 0,
  },
})
