import { defineConfig } from 'vitest/config'
import base from './vitest.config.ts'

// `npm run test:runtime`: the part of the suite that can break when only the Node line changes,
// for the lines CI does not run the whole suite on (Node 22 and 26; see scripts/ci-runtimes.sh).
// What varies between Node lines is the runtime under the library, not its logic: timers and
// AbortSignal (the executor), the built package as Node's ESM loader resolves it (exports, dist),
// the SQLite driver (node:sqlite is built into Node and changes with it), and the sockets of the
// network drivers. So: the core executor, the package's exports and built dist, the CLI's demo
// (forked processes on the built bin), the multi-process apps on the built package, and the
// SQLite, PostgreSQL (server and PGlite) and Redis provider suites. Not the stores' CLI tests
// (admin.test.ts: a minute of process spawning per line, the same code paths as the demo).
// Measured on the 2-core CI machine: about 150 s a line, against about 500 s for the whole suite.
export default defineConfig({
  test: {
    // Not mergeConfig(): it would append this include to the base's, which takes every test.
    ...base.test,
    include: [
      'test/core/**/*.test.ts',
      'test/testing/**/*.test.ts',
      'test/package-exports.test.ts',
      'test/cli/demo.test.ts',
      'test/integrations/multi-process.test.ts',
      'test/providers/sqlite/**/*.test.ts',
      'test/providers/postgres/**/*.test.ts',
      'test/providers/redis/**/*.test.ts',
    ],
    exclude: [...(base.test?.exclude ?? []), 'test/providers/*/admin.test.ts'],
  },
})
