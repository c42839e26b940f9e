import { defineConfig } from 'vitest/config'
import base from './vitest.config.ts'

// `npm run test:runtime`: the part of the suite that can break when only the Node line changes,
// for the lines CI does not run the whole suite on (Node 22, 24 and 26; see scripts/ci-runtimes.sh).
// What varies between Node lines is the runtime under the library, not its logic: timers,
// AbortSignal and AsyncLocalStorage (the core and the integrations that schedule through them),
// the built package as Node's ESM loader resolves it (exports, dist), child processes (the CLI,
// the demo, the multi-process apps), the SQLite drivers (node:sqlite is built into Node and
// changes with it), PGlite's WebAssembly, and the sockets under the network drivers (pg and
// ioredis, through the PostgreSQL and Redis inspectors and run ledgers). Not every store's whole
// suite again: the stores' logic does not depend on the Node line, and the PostgreSQL and Redis
// provider suites (about 90 s a line) run on Node 20 with everything else. Nor the stores' CLI
// tests (admin.test.ts: a minute of process spawning per line, the same code paths as the demo
// and the CLI's own tests).
export default defineConfig({
  plugins: base.plugins,
  test: {
    // Not mergeConfig(): it would append this include to the base's, which takes every test.
    ...base.test,
    include: [
      'test/core/**/*.test.ts',
      'test/testing/**/*.test.ts',
      'test/package-exports.test.ts',
      'test/cli/{main,demo,run-slot,store-url,lock-table}.test.ts',
      'test/integrations/{multi-process,with-lock,scheduler-lock,node-cron,opentelemetry,shutdown,imports}.test.ts',
      'test/providers/sqlite/**/*.test.ts',
      'test/providers/postgres/{pglite,inspector,run-ledger}.test.ts',
      'test/providers/redis/{inspector,run-ledger}.test.ts',
    ],
    exclude: [...(base.test?.exclude ?? []), 'test/providers/*/admin.test.ts'],
  },
})
