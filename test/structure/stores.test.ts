// Adding a store touches more than its folder: this test names every place that must know it, so
// that a store added in one place and forgotten in another fails here (CONTRIBUTING.md, "Adding a
// store"). The folders under src/providers/ are the list; the registry (src/providers/registry.ts)
// holds what the command line needs, and the help texts are derived from it.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { STORES } from '../../src/providers/registry.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const read = (path: string): string => readFileSync(ROOT + path, 'utf8')
const has = (path: string): boolean => existsSync(ROOT + path)

const FOLDERS = readdirSync(`${ROOT}src/providers`, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .sort()

/** Stores that run only inside their platform (workerd, Deno) or one process: no URL, no bench setup, no fault suite of their own. */
const PLATFORM_ONLY: Readonly<Record<string, string>> = {
  'cloudflare-d1': 'a Worker binding, reached only inside workerd (Miniflare in the tests)',
  'cloudflare-do': 'a Durable Object binding, reached only inside workerd (Miniflare in the tests)',
  'deno-kv': 'a Deno.Kv, reached only inside Deno',
  'in-memory': 'one process: nothing to connect to',
}
/** Stores the command line cannot open (no URL form), though they run in Node. */
const NO_URL: Readonly<Record<string, string>> = {
  'azure-blob': 'a ContainerClient with credentials of its own; no URL form yet',
}

/** Drivers the repository does not install, on purpose. */
const NOT_INSTALLED: Readonly<Record<string, string>> = {
  'better-sqlite3': 'npm ci would compile it; its tests run where it is installed (CONTRIBUTING.md)',
}

describe('every store is known everywhere it must be', () => {
  const packageJson = JSON.parse(read('package.json')) as {
    exports: Record<string, unknown>
    devDependencies: Record<string, string>
  }

  it('finds the stores (the folders under src/providers/)', () => {
    expect(FOLDERS.length).toBeGreaterThanOrEqual(16)
    for (const id of Object.keys({ ...PLATFORM_ONLY, ...NO_URL }))
      expect(FOLDERS, `exemption for a store that does not exist: ${id}`).toContain(id)
  })

  it.each(FOLDERS)(
    '%s: a subpath export, a docs page listed in docs/providers/README.md and the README, and tests',
    (id) => {
      if (id !== 'in-memory') expect(packageJson.exports[`./${id}`], `package.json exports "./${id}"`).toBeDefined()
      expect(has(`docs/providers/${id}.md`), `docs/providers/${id}.md`).toBe(true)
      expect(read('docs/providers/README.md'), `docs/providers/README.md links ${id}.md`).toContain(`(${id}.md`)
      expect(read('README.md'), `README.md links docs/providers/${id}.md`).toContain(`docs/providers/${id}.md`)
      expect(has(`test/providers/${id}`), `test/providers/${id}/`).toBe(true)
    },
  )

  it.each(FOLDERS.filter((id) => !(id in PLATFORM_ONLY)))('%s: a bench setup and a fault suite', (id) => {
    expect(has(`bench/setups/${id}.ts`), `bench/setups/${id}.ts`).toBe(true)
    expect(read('bench/setups/registry.ts'), `bench/setups/registry.ts names ${id}`).toMatch(
      new RegExp(`['\\s]${id}'?:`),
    )
    expect(has(`test/faults/providers/${id}.test.ts`), `test/faults/providers/${id}.test.ts`).toBe(true)
  })

  it.each(FOLDERS.filter((id) => !(id in PLATFORM_ONLY) && !(id in NO_URL)))(
    '%s: in the registry, with an admin module the command line loads',
    (id) => {
      expect(
        STORES.map((s) => s.id),
        `src/providers/registry.ts has an entry for ${id}`,
      ).toContain(id)
      expect(has(`src/providers/${id}/admin.ts`), `src/providers/${id}/admin.ts`).toBe(true)
    },
  )

  it('the registry says which stores keep a run history: those with a run-ledger.ts, wired into their admin', () => {
    for (const store of STORES) {
      const ledger = has(`src/providers/${store.id}/run-ledger.ts`)
      expect(store.runHistory, `registry entry ${store.id}: runHistory`).toBe(ledger)
      if (!ledger) continue
      const admin = read(`src/providers/${store.id}/admin.ts`)
      expect(admin, `src/providers/${store.id}/admin.ts opens its run ledger`).toMatch(/runLedger/)
    }
  })

  it('the registry names only stores that exist, each with its drivers installed for the tests and named on its docs page', () => {
    for (const store of STORES) {
      expect(FOLDERS, `registry entry ${store.id} has a folder`).toContain(store.id)
      const page = read(`docs/providers/${store.id}.md`)
      for (const driver of store.drivers) {
        if (driver.startsWith('node:')) continue
        expect(page, `docs/providers/${store.id}.md names ${driver}`).toContain(driver)
        if (driver in NOT_INSTALLED) continue
        expect(packageJson.devDependencies[driver], `devDependencies has ${driver} (${store.id})`).toBeDefined()
      }
    }
  })
})
