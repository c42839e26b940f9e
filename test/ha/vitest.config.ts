import { defineConfig } from 'vitest/config'
import { watchdog } from '../helpers/watchdog.ts'

// The topology suite (`npm run test:ha`): replicated stores in network namespaces of their own
// (test/ha/support/netns.ts), failed over while nodes take locks. Needs root. Two files at a time
// (each file's topologies sit on subnets of their own): most of a row's time is spent waiting for
// a failover, lockAtMostFor and a restore, so one at a time took twice as long on 2 cores. Tests
// within a file run in order: each describe's topology is failed over scenario after scenario.
// `SHEDLOCK_HA_FULL=1` runs the long matrix (support/common.ts).
export default defineConfig({
  // A hung file fails the run and is named (test/helpers/watchdog.ts): the suite takes about
  // 4 min in all; the long matrix (SHEDLOCK_HA_FULL) gets an hour a file.
  plugins: [watchdog({ fileSeconds: process.env.SHEDLOCK_HA_FULL === '1' ? 3600 : 480 })],
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/ha/**/*.test.ts'],
    globalSetup: ['test/ha/support/global-setup.ts'],
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 150_000,
    hookTimeout: 180_000,
    retry: 0,
  },
})
