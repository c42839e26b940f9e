import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    // The fault suite has its own config and command (npm run test:faults).
    exclude: ['test/faults/**', '**/node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Provider suites sleep on real time; two files at a time keeps a 2-core machine responsive.
    maxWorkers: 2,
  },
})
