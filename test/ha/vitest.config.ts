import { defineConfig } from 'vitest/config'

// The topology suite (`npm run test:ha`): replicated stores in network namespaces of their own
// (test/ha/support/netns.ts), failed over while nodes take locks. One file at a time, tests in
// order: each describe's topology is failed over scenario after scenario. Needs root.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/ha/**/*.test.ts'],
    globalSetup: ['test/ha/support/global-setup.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 180_000,
    retry: 0,
  },
})
