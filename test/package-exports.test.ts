import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import * as root from '../src/index.ts'

// A plain ES module that scripts/oldest-drivers.sh reads too; the specifier is a string so that tsc leaves it alone.
const driversModule: string = '../scripts/drivers.mjs'
const { DRIVERS } = (await import(driversModule)) as {
  DRIVERS: Record<string, { range: string; oldest: string; pages: string[]; tests: string[] }>
}

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

// `^x.y.z` (0.x: the minor is fixed) or `>=x.y.z <a.b.c`, the two forms scripts/drivers.mjs uses; a release version only.
function satisfies(version: string, range: string): boolean {
  const parse = (v: string): number[] => v.split('.').map(Number)
  const compare = (a: number[], b: number[]): number => a.map((n, i) => n - b[i]!).find((d) => d !== 0) ?? 0
  const v = parse(version)
  if (range.startsWith('^')) {
    const floor = parse(range.slice(1))
    const fixed = floor[0] === 0 ? 2 : 1
    return compare(v, floor) >= 0 && v.slice(0, fixed).join('.') === floor.slice(0, fixed).join('.')
  }
  const [low, high] = range.split(' ').map((part) => parse(part.replace(/^[<>]=?/, '')))
  return compare(v, low!) >= 0 && compare(v, high!) < 0
}

const entries = Object.entries(pkg.exports).filter(([key]) => key !== './package.json')

describe('package.json', () => {
  it('is an ES module package without runtime dependencies', () => {
    expect(pkg.type).toBe('module')
    expect(pkg.dependencies ?? {}).toEqual({})
  })

  it("has no peer dependencies: the drivers are the application's, and scripts/drivers.mjs holds the ranges they are tested in", () => {
    expect(pkg.peerDependencies).toBeUndefined()
    expect(pkg.peerDependenciesMeta).toBeUndefined()
  })

  it('gives every driver the CLI imports a tested range in scripts/drivers.mjs', () => {
    const sources = readdirSync(join(rootDir, 'src'), { recursive: true, encoding: 'utf8' }).filter((file) =>
      file.endsWith('.ts'),
    )
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
    // better-sqlite3 compiles on install, so neither npm ci nor scripts/oldest-drivers.sh installs it:
    // its tests run where it is installed (CONTRIBUTING.md), on libsql's API otherwise.
    wanted.delete('better-sqlite3')
    for (const name of wanted) expect(DRIVERS[name], `${name} has no range in scripts/drivers.mjs`).toBeDefined()
  })

  it("tests each driver range from its lowest version: oldest is the first alternative's floor", () => {
    for (const [name, d] of Object.entries(DRIVERS)) {
      const alternatives = d.range.split('||').map((a) => a.trim())
      expect([`^${d.oldest}`, `>=${d.oldest}`], name).toContain(alternatives[0]!.split(' ')[0])
      for (const a of alternatives) expect(a, name).toMatch(/^(\^\d+\.\d+\.\d+|>=\d+\.\d+\.\d+ <\d+\.\d+\.\d+)$/)
      // The newest the lockfile installs for npm test is inside the range too.
      const installed = JSON.parse(readFileSync(join(rootDir, 'node_modules', name, 'package.json'), 'utf8')) as {
        version: string
      }
      expect(
        alternatives.some((a) => satisfies(installed.version, a)),
        `${name} ${installed.version} is outside ${d.range}`,
      ).toBe(true)
    }
  })

  it('reads the ranges as npm does', () => {
    expect(satisfies('6.2.0', '^6.0.0')).toBe(true)
    expect(satisfies('7.0.0', '^6.0.0')).toBe(false)
    expect(satisfies('0.28.18', '^0.28.0')).toBe(true)
    expect(satisfies('0.29.0', '^0.28.0')).toBe(false)
    expect(satisfies('0.45.4', '>=0.34.0 <0.46.0')).toBe(true)
    expect(satisfies('0.46.0', '>=0.34.0 <0.46.0')).toBe(false)
    expect(satisfies('0.33.9', '>=0.34.0 <0.46.0')).toBe(false)
  })

  it("each store's docs page states its drivers' ranges exactly as scripts/drivers.mjs does", () => {
    const byPage = new Map<string, string[]>()
    for (const [name, d] of Object.entries(DRIVERS))
      for (const page of d.pages) byPage.set(page, [...(byPage.get(page) ?? []), `\`${name}\` \`${d.range}\``])
    expect(byPage.size).toBeGreaterThanOrEqual(13)
    expect(byPage.has('docs/orm.md')).toBe(true)
    for (const [page, pairs] of byPage) {
      const text = readFileSync(join(rootDir, page), 'utf8')
      const line = /^Tested (?:drivers|versions): (.*)\.$/m.exec(text)
      expect(line, `${page} has no "Tested drivers:" (or "Tested versions:") line`).not.toBeNull()
      expect(line![1]!.split(', '), page).toEqual(pairs)
    }
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
          stem === key.slice(2) ||
            stem === `${key.slice(2)}/index` ||
            stem.endsWith(`/${key.slice(2)}`) ||
            stem.endsWith(`/${key.slice(2)}/index`),
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
    const missing = adapters.filter(
      (adapter) => !exported.has(`./dist/orm/${adapter}.js`) || !pkg.exports[`./orm/${adapter}`],
    )
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
