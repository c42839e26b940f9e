import { tmpdir } from 'node:os'
import { defineConfig } from 'vitest/config'
import { watchdog } from '../watchdog.ts'

// A scratch suite for test/support/watchdog.test.ts only: files that hang on purpose, under a
// watchdog with a 3 s limit per file. Its files end in .hang.ts, which no real config includes.
export default defineConfig({
  plugins: [watchdog({ fileSeconds: 3, checkMs: 200 })],
  // Not node_modules/.vite under this folder.
  cacheDir: `${tmpdir()}/shedlock-watchdog-fixture`,
  test: {
    root: new URL('.', import.meta.url).pathname,
    include: ['*.hang.ts'],
    // The hangs must be the watchdog's to find, not vitest's own timeout's.
    testTimeout: 600_000,
    hookTimeout: 600_000,
    retry: 0,
    maxWorkers: 2,
  },
})
