import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import * as root from '../src/index.ts'

const rootDir = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  type?: string
  exports: Record<string, string | { types?: string; default?: string }>
  dependencies?: Record<string, string>
  peerDependencies?: Record<string, string>
  peerDependenciesMeta?: Record<string, { optional?: boolean }>
  devDependencies: Record<string, string>
  typesVersions?: Record<string, Record<string, string[]>>
  types?: string
}

const entries = Object.entries(pkg.exports).filter(([key]) => key !== './package.json')

describe('package.json', () => {
  it('is an ES module package without runtime dependencies', () => {
    expect(pkg.type).toBe('module')
    expect(pkg.dependencies ?? {}).toEqual({})
  })

  it('declares every driver as an optional peer, with the range the tests run against', () => {
    const peers = Object.entries(pkg.peerDependencies ?? {})
    expect(peers.length).toBeGreaterThan(0)
    for (const [name, range] of peers) {
      expect(pkg.peerDependenciesMeta?.[name], name).toEqual({ optional: true })
      // better-sqlite3 is no devDependency (npm ci would compile it): its range is the one its
      // tests ran against where it was installed (CONTRIBUTING.md), and its types are a devDependency.
      if (name === 'better-sqlite3') expect(pkg.devDependencies['@types/better-sqlite3'], name).toBeDefined()
      else expect(range, name).toBe(pkg.devDependencies[name])
    }
    expect(Object.keys(pkg.peerDependenciesMeta ?? {}).sort()).toEqual(Object.keys(pkg.peerDependencies ?? {}).sort())
  })

  it('declares as a peer every driver the CLI imports', () => {
    const sources = readdirSync(join(rootDir, 'src'), { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'))
    const wanted = new Set<string>()
    const packageOf = (specifier: string): string =>
      specifier
        .split('/')
        .slice(0, specifier.startsWith('@') ? 2 : 1)
        .join('/')
    for (const file of sources) {
      const text = readFileSync(join(rootDir, 'src', file), 'utf8')
      for (const match of text.matchAll(/importDriver(?:<[^>]*>)?\('([^']+)'/g)) wanted.add(packageOf(match[1]!))
      for (const match of text.matchAll(/^const SDK = '([^']+)'/gm)) wanted.add(packageOf(match[1]!))
    }
    expect(wanted.size).toBeGreaterThanOrEqual(10)
    for (const name of wanted) expect(pkg.peerDependencies?.[name], `${name} is not a peer`).toBeDefined()
  })

  it('has a types fallback for node10 resolution: one typesVersions entry per subpath', () => {
    expect(pkg.types).toBe((pkg.exports['.'] as { types: string }).types)
    const mapped = pkg.typesVersions?.['*'] ?? {}
    for (const [key, target] of entries) {
      if (key === '.') continue
      expect(mapped[key.slice(2)], key).toEqual([(target as { types: string }).types])
    }
  })

  it('exports ./package.json as itself', () => {
    expect(pkg.exports['./package.json']).toBe('./package.json')
  })

  it('has export entries', () => {
    expect(entries.map(([key]) => key)).toContain('.')
    expect(entries.map(([key]) => key)).toContain('./testing')
  })

  describe.each(entries)('exports[%j]', (key, target) => {
    it('maps dist/X.js to an existing src/X.ts, with matching types', () => {
      expect(typeof target).toBe('object')
      const { default: js, types } = target as { types?: string; default?: string }
      expect(js).toMatch(/^\.\/dist\/.+\.js$/)
      const stem = js!.slice('./dist/'.length, -'.js'.length)
      expect(types).toBe(`./dist/${stem}.d.ts`)
      expect(existsSync(`${rootDir}src/${stem}.ts`), `src/${stem}.ts is missing`).toBe(true)
      // "types" must come first for TypeScript's resolution.
      expect(Object.keys(target as object)[0]).toBe('types')
    })

    it('is named after its module', () => {
      const stem = (target as { default: string }).default.slice('./dist/'.length, -'.js'.length)
      if (key === '.') expect(stem).toBe('index')
      else
        expect(
          stem === key.slice(2) || stem === `${key.slice(2)}/index` || stem.endsWith(`/${key.slice(2)}`) || stem.endsWith(`/${key.slice(2)}/index`),
          stem,
        ).toBe(true)
    })
  })

  it('every store folder but in-memory (exported from the root) has an export entry', () => {
    const exported = new Set(entries.map(([, target]) => (target as { default?: string }).default))
    const stores = readdirSync(`${rootDir}src/providers`, { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'in-memory')
      .map((entry) => entry.name)
    expect(stores.length).toBeGreaterThan(0)
    const missing = stores.filter((store) => !exported.has(`./dist/providers/${store}/index.js`))
    expect(missing, 'src/providers/ folders without an export entry').toEqual([])
  })

  it('every ORM adapter of src/orm/ has an export entry, shedlock/orm/<library>', () => {
    const exported = new Set(entries.map(([, target]) => (target as { default?: string }).default))
    const adapters = readdirSync(`${rootDir}src/orm`)
      .filter((file) => file.endsWith('.ts') && file !== 'sql-client.ts')
      .map((file) => file.slice(0, -'.ts'.length))
    expect(adapters.length).toBe(7)
    const missing = adapters.filter((adapter) => !exported.has(`./dist/orm/${adapter}.js`) || !pkg.exports[`./orm/${adapter}`])
    expect(missing, 'src/orm/ adapters without an export entry').toEqual([])
  })
})

describe('root index', () => {
  it.each([
    'parseDuration',
    'lockConfiguration',
    'createLockingTaskExecutor',
    'assertLocked',
    'extendActiveLock',
    'keepAliveLockProvider',
    'inMemoryLockProvider',
  ])('exports the function %s', (name) => {
    expect(typeof (root as Record<string, unknown>)[name]).toBe('function')
  })

  it.each([
    ['ShedLockError', Error],
    ['LockConfigurationError', root.ShedLockError],
    ['LockProviderError', root.ShedLockError],
    ['LockStateError', root.ShedLockError],
    ['NotLockedError', root.ShedLockError],
    ['NoActiveLockError', root.ShedLockError],
    ['LockCannotBeExtendedError', root.ShedLockError],
  ] as const)('exports the error class %s', (name, base) => {
    const ErrorClass = (root as unknown as Record<string, new (message: string) => Error>)[name]!
    expect(typeof ErrorClass).toBe('function')
    const error = new ErrorClass('message')
    expect(error).toBeInstanceOf(base)
    expect(error.name).toBe(name)
    expect(error.message).toBe('message')
  })
})
