// The packages as a user gets them: both tarballs (`npm pack`) installed into a fresh project in
// a temporary folder, then publint, are-the-types-wrong, the README's first lock against
// PostgreSQL, a CommonJS consumer under several TypeScript settings, the docs' runnable examples
// (the README's first lock, docs/typescript.md's CommonJS program, docs/orm.md's Prisma 7 set-up)
// run as shown, and every TypeScript code block of the README and docs/ type-checked against the
// installed packages (as ES modules, and as CommonJS where marked).
//
// The tarballs are packed from a copy of each package (package.json and its `files`, from the
// dist/ that `npm test` has just built), with prepack's `npm run build` left out: it would rebuild
// (rm -rf dist) under the feet of the test files running alongside. The rest of prepack and
// postpack runs as on a publish, so the tarballs' package.json is the cleaned one.
// They install with `npm install --offline`: they have no dependencies. The registry packages a
// consumer adds (pg, typescript, the drivers and frameworks the docs import) are linked from this
// repository's node_modules, which holds exactly the versions the tests run against.
import { type SpawnSyncReturns, spawnSync } from 'node:child_process'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startNode, waitFor } from '../helpers/processes.ts'
import { postgresPoolOrSkip, POSTGRES_URL } from '../helpers/sql-pools.ts'
import { snippetsOf, writeSnippets } from './snippets.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
const fixtures = fileURLToPath(new URL('./fixtures', import.meta.url))
const bin = (name: string): string => join(root, 'node_modules', '.bin', name)
const work = mkdtempSync(join(tmpdir(), 'shedlock-consumer-'))
const consumer = join(work, 'consumer')
afterAll(() => rmSync(work, { recursive: true, force: true }))
// Each tsc run takes 2-6 s, more on a loaded machine: the default 30 s per test is too tight.

interface Packed {
  name: string
  tarball: string
  files: string[]
  /** The package.json in the tarball. */
  manifest: Record<string, unknown>
  /** Whether postpack put the staged package.json back as it was. */
  restored: boolean
}
const packed: Packed[] = []

/**
 * Copies the package in `folder` (its package.json and `files`) and scripts/pack-manifest.mjs to
 * the same place under a staging folder, with `npm run build && ` cut from the copy's prepack.
 */
function stage(folder: string): string {
  const to = join(work, 'stage', folder)
  mkdirSync(to, { recursive: true })
  mkdirSync(join(work, 'stage', 'scripts'), { recursive: true })
  cpSync(join(root, 'scripts', 'pack-manifest.mjs'), join(work, 'stage', 'scripts', 'pack-manifest.mjs'))
  const pkg = JSON.parse(readFileSync(join(root, folder, 'package.json'), 'utf8')) as {
    files: string[]
    scripts: Record<string, string>
  }
  for (const entry of pkg.files)
    if (existsSync(join(root, folder, entry))) cpSync(join(root, folder, entry), join(to, entry), { recursive: true })
  expect(pkg.scripts.prepack, folder).toMatch(/^npm run build && node \S*scripts\/pack-manifest\.mjs clean$/)
  expect(pkg.scripts.postpack, folder).toMatch(/^node \S*scripts\/pack-manifest\.mjs restore$/)
  pkg.scripts.prepack = String(pkg.scripts.prepack).replace('npm run build && ', '')
  writeFileSync(join(to, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`)
  return to
}

/** Runs a command; npm's own variables of the `npm test` around us are left out, so they do not steer the nested npm. */
function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: Record<string, string> = {},
): SpawnSyncReturns<string> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)))
  return spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...clean, ...env }, timeout: 60_000 })
}

function output(result: SpawnSyncReturns<string>): string {
  return `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? String(result.error) : ''}`
}

function expectSuccess(result: SpawnSyncReturns<string>): string {
  expect(result.status, output(result)).toBe(0)
  return result.stdout
}

/** tsc of this repository (TypeScript 6) on a project of the consumer. */
function tsc(project: string): SpawnSyncReturns<string> {
  return run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], consumer)
}

/** Writes a tsconfig.json into `folder` of the consumer and returns its path. */
function tsconfig(folder: string, name: string, compilerOptions: Record<string, unknown>, include: string[]): string {
  const path = join(consumer, folder, name)
  const options = {
    strict: true,
    skipLibCheck: false,
    types: ['node'],
    target: 'es2023',
    lib: ['es2023'],
    ...compilerOptions,
  }
  writeFileSync(path, JSON.stringify({ compilerOptions: options, include }, null, 2))
  return path
}

/**
 * Links every package of this repository's node_modules into the consumer's, except the two
 * installed from the tarballs: what a user's project would have installed next to shedlock.
 */
function linkRegistryPackages(): void {
  const from = join(root, 'node_modules')
  const to = join(consumer, 'node_modules')
  const skip = new Set(['.bin', '.cache', '.package-lock.json', 'shedlock', '@shedlock'])
  for (const entry of readdirSync(from)) {
    if (skip.has(entry)) continue
    if (entry.startsWith('@')) {
      mkdirSync(join(to, entry), { recursive: true })
      for (const inner of readdirSync(join(from, entry))) {
        if (!existsSync(join(to, entry, inner))) symlinkSync(join(from, entry, inner), join(to, entry, inner), 'dir')
      }
    } else if (!existsSync(join(to, entry))) {
      symlinkSync(join(from, entry), join(to, entry), 'dir')
    }
  }
}

beforeAll(() => {
  for (const folder of ['', 'packages/nestjs']) {
    const dist = join(root, folder, 'dist', 'index.js')
    if (!existsSync(dist))
      throw new Error(`${dist} is missing: run "npm run build && npm run build:nestjs" first (npm test does)`)
    const staged = stage(folder)
    const before = readFileSync(join(staged, 'package.json'), 'utf8')
    const result = run('npm', ['pack', '--json', '--pack-destination', work], staged)
    const [info] = JSON.parse(expectSuccess(result).slice(result.stdout.indexOf('[\n'))) as {
      name: string
      filename: string
      files: { path: string }[]
    }[]
    const tarball = join(work, info!.filename)
    const inTarball = run('tar', ['-xOzf', tarball, 'package/package.json'], work)
    packed.push({
      name: info!.name,
      tarball,
      files: info!.files.map((f) => f.path),
      manifest: JSON.parse(expectSuccess(inTarball)) as Record<string, unknown>,
      restored: readFileSync(join(staged, 'package.json'), 'utf8') === before,
    })
  }
  mkdirSync(consumer)
  writeFileSync(
    join(consumer, 'package.json'),
    JSON.stringify({ name: 'shedlock-consumer', private: true, version: '1.0.0' }),
  )
  // --legacy-peer-deps: npm would fetch the NestJS peers from the registry; they are linked below.
  expectSuccess(
    run(
      'npm',
      [
        'install',
        '--offline',
        '--legacy-peer-deps',
        '--no-audit',
        '--no-fund',
        '--no-package-lock',
        ...packed.map((p) => p.tarball),
      ],
      consumer,
    ),
  )
  linkRegistryPackages()
  cpSync(fixtures, consumer, { recursive: true })
}, 120_000)

describe('the tarballs', { timeout: 120_000 }, () => {
  it('hold the LICENSE, the README and dist/, without source maps, src/ or tests', () => {
    expect(packed.map((p) => p.name)).toEqual(['shedlock', '@shedlock/nestjs'])
    for (const { name, files } of packed) {
      expect(files, name).toContain('LICENSE')
      expect(files, name).toContain('README.md')
      expect(files, name).toContain('dist/index.js')
      expect(files, name).toContain('dist/index.d.ts')
      expect(
        files.filter((f) => f.endsWith('.map')),
        name,
      ).toEqual([])
      expect(
        files.filter((f) => /^(src|test)\//.test(f)),
        name,
      ).toEqual([])
    }
  })

  it('carry a package.json without what only this repository uses, and the repository keeps its own', () => {
    for (const { name, manifest, restored } of packed) {
      for (const field of ['workspaces', 'overrides', 'allowScripts', 'devDependencies', 'scripts'])
        expect(manifest[field], `${name} ${field}`).toBeUndefined()
      expect(manifest.exports, name).toBeDefined()
      expect(restored, `${name}: postpack restores package.json`).toBe(true)
    }
    const repository = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>
    expect(repository.workspaces).toBeDefined()
  })

  it('install next to the drivers a project already has (pg 8.11, ioredis 5, redis 4, mongodb 6), without --legacy-peer-deps', () => {
    const app = join(work, 'existing-app')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'existing-app', private: true, version: '1.0.0' }))
    const npmInstall = (...specs: string[]) =>
      run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', ...specs], app, {
        npm_config_legacy_peer_deps: 'false',
      })
    expectSuccess(npmInstall('pg@8.11.0', 'ioredis@5', 'redis@4', 'mongodb@6'))
    expectSuccess(npmInstall(packed[0]!.tarball))
    // No "UNMET OPTIONAL DEPENDENCY" lines: shedlock declares no peers.
    const ls = run('npm', ['ls'], app)
    expect(output(ls)).not.toMatch(/UNMET/)
    expect(ls.status, output(ls)).toBe(0)
  })

  it('run no script at install, and the installed bin is executable', () => {
    for (const name of ['shedlock', '@shedlock/nestjs']) {
      const manifest = JSON.parse(readFileSync(join(consumer, 'node_modules', name, 'package.json'), 'utf8')) as {
        scripts?: Record<string, string>
      }
      for (const script of ['preinstall', 'install', 'postinstall', 'prepare'])
        expect(manifest.scripts?.[script], `${name} ${script}`).toBeUndefined()
    }
    expect(statSync(join(consumer, 'node_modules', 'shedlock', 'dist', 'cli', 'main.js')).mode & 0o111).not.toBe(0)
    const help = run(join(consumer, 'node_modules', '.bin', 'shedlock'), ['--help'], consumer)
    expect(expectSuccess(help)).toMatch(/^Usage: shedlock/m)
  })

  it('pass publint --strict', () => {
    for (const { tarball } of packed) {
      const result = run(bin('publint'), ['--strict', tarball], work)
      expect(expectSuccess(result), tarball).toMatch(/All good!/)
    }
  })

  // ESM only: CommonJS loads the packages through require(esm) (Node.js >= 20.19), which attw
  // reports as cjs-resolves-to-esm; every other rule holds, node10 resolution included.
  it('pass are-the-types-wrong, for ESM, bundlers and node10', () => {
    for (const { tarball } of packed) {
      const result = run(bin('attw'), [tarball, '--ignore-rules', 'cjs-resolves-to-esm', '--format', 'ascii'], work)
      expect(expectSuccess(result), tarball).toMatch(/No problems found/)
    }
  })
})

describe('an ES module consumer', { timeout: 120_000 }, () => {
  it('runs the README first lock against a fresh PostgreSQL table', async () => {
    const pool = await postgresPoolOrSkip(1)
    if (!pool) return
    await pool.end()
    expectSuccess(tsc(tsconfig('esm', 'tsconfig.json', { module: 'nodenext', outDir: 'out' }, ['readme-example.ts'])))
    const table = `pack_consumer_${process.pid}`
    const result = run(process.execPath, ['out/readme-example.js'], join(consumer, 'esm'), {
      DATABASE_URL: POSTGRES_URL,
      SHEDLOCK_TABLE: table,
    })
    expect(expectSuccess(result)).toBe('A: purged; B: held\nrows: purge-sessions\n')
  })

  it('type-checks with module node20', () => {
    const result = tsc(
      tsconfig('esm', 'tsconfig.node20.json', { module: 'node20', noEmit: true }, ['readme-example.ts']),
    )
    expect(result.status, output(result)).toBe(0)
  })
})

/** The fenced blocks of a Markdown section (from its heading to the next heading of its level or above), with their language. */
function blocksOfSection(file: string, heading: string): { info: string; code: string }[] {
  const text = readFileSync(join(root, file), 'utf8')
  const start = text.indexOf(`\n${heading}\n`)
  if (start === -1) throw new Error(`${file} has no heading ${JSON.stringify(heading)}`)
  const level = /^#+/.exec(heading)![0]
  const rest = text.slice(start + heading.length + 2)
  const end = rest.search(new RegExp(`\\n#{1,${level.length}} `))
  const section = end === -1 ? rest : rest.slice(0, end)
  return [...section.matchAll(/^```(\w+)[^\n]*\n([\s\S]*?)^```$/gm)].map((m) => ({ info: m[1]!, code: m[2]! }))
}

// The README's first lock and docs/typescript.md's CommonJS program, as a reader runs them: in a
// project that installed the packed tarball, each on a database of its own that nothing else
// created (the README's task must not need a table of its own).
describe('the docs examples, run as shown', { timeout: 120_000 }, () => {
  const database = `shedlock_docs_${process.pid}`
  const url = new URL(POSTGRES_URL)
  url.pathname = `/${database}`
  let admin: Awaited<ReturnType<typeof postgresPoolOrSkip>>
  beforeAll(async () => {
    admin = await postgresPoolOrSkip(1)
    if (admin) await admin.query(`CREATE DATABASE ${database}`)
  })
  afterAll(async () => {
    if (!admin) return
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await admin.end()
  })

  it("the README's first lock prints on its first tick, a second copy skips, and SIGTERM stops both", async () => {
    if (!admin) return
    const [block, ...others] = snippetsOf(root).filter(
      (s) => s.file === 'README.md' && s.modules.includes('commonjs') && s.code.includes('reportDatabaseSize'),
    )
    expect(others, 'one README block is the first lock').toEqual([])
    // As the README says: saved as first-lock.mjs in a project of npm init (CommonJS by default).
    const app = join(consumer, 'first-lock')
    mkdirSync(app, { recursive: true })
    writeFileSync(join(app, 'first-lock.mjs'), block!.code)
    const env = { DATABASE_URL: url.href }
    const first = startNode(['first-lock.mjs'], { cwd: app, env, killAfterMs: 60_000 })
    expect(await waitFor(() => first.stdout().includes('\n'), 20_000), first.stderr()).toBe(true)
    const second = startNode(['first-lock.mjs'], { cwd: app, env, killAfterMs: 60_000 })
    expect(await waitFor(() => second.stdout().includes('\n'), 20_000), second.stderr()).toBe(true)
    for (const copy of [first, second]) copy.child.kill('SIGTERM')
    const [a, b] = await Promise.all([first.done, second.done])
    expect(a.stdout).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z ran: the database holds \d+ \w+\n$/)
    expect(b.stdout).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z skipped: held\n$/)
    expect([a.code, a.stderr, b.code, b.stderr]).toEqual([0, '', 0, ''])
  })

  it("docs/typescript.md's CommonJS program builds with its tsconfig.json under TypeScript 6 and runs", async () => {
    if (!admin) return
    const blocks = blocksOfSection('docs/typescript.md', '## A complete CommonJS program')
    const json = blocks.filter((b) => b.info === 'json').map((b) => JSON.parse(b.code) as Record<string, unknown>)
    const manifest = json.find((j) => 'scripts' in j)
    const config = json.find((j) => 'compilerOptions' in j)
    const program = blocks.find((b) => b.info === 'ts')
    expect([manifest, config, program].every(Boolean), 'a package.json, a tsconfig.json and a ts block').toBe(true)
    const app = join(consumer, 'commonjs-program')
    mkdirSync(join(app, 'src'), { recursive: true })
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'report', private: true, ...manifest }))
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(config))
    writeFileSync(join(app, 'src', 'report.ts'), program!.code)
    expectSuccess(tsc(join(app, 'tsconfig.json')))
    const env = { DATABASE_URL: url.href }
    const once = () => run('npm', ['start', '--silent'], app, env)
    expect(expectSuccess(once())).toMatch(/^connections: \d+\n$/)
    expect(expectSuccess(once())).toBe('skipped: held\n')
  })
})

// docs/orm.md's Prisma 7 schema, generated and compiled as a user does: `prisma generate` (the
// prisma-client generator writes TypeScript into src/), then tsc, then node. The ES module project
// resolves as a bundler does, where Prisma writes extensionless imports unless the schema says
// importFileExtension; the CommonJS one compiles with nodenext.
describe("docs/orm.md's Prisma 7 set-up", { timeout: 120_000 }, () => {
  const projects = [
    ['an ES module project (moduleResolution bundler)', 'module', { module: 'esnext', moduleResolution: 'bundler' }],
    ['a CommonJS project (module nodenext)', 'commonjs', { module: 'nodenext' }],
  ] as const
  it.each(projects)('runs after tsc in %s', async (_label, type, compilerOptions) => {
    const pool = await postgresPoolOrSkip(1)
    if (!pool) return
    await pool.end()
    const schema = blocksOfSection('docs/orm.md', '## Prisma 7: a client that runs after `tsc`').find(
      (b) => b.info === 'prisma',
    )
    expect(schema, 'a prisma block').toBeDefined()
    const app = join(consumer, `prisma-${type}`)
    mkdirSync(join(app, 'prisma'), { recursive: true })
    mkdirSync(join(app, 'src'))
    writeFileSync(join(app, 'package.json'), JSON.stringify({ private: true, type }))
    writeFileSync(join(app, 'prisma', 'schema.prisma'), schema!.code)
    const options = {
      ...compilerOptions,
      rootDir: 'src',
      outDir: 'dist',
      types: ['node'],
      strict: true,
      skipLibCheck: true,
    }
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: options, include: ['src'] }))
    const table = `prisma_consumer_${type}_${process.pid}`
    writeFileSync(
      join(app, 'src', 'index.ts'),
      [
        "import { PrismaPg } from '@prisma/adapter-pg'",
        "import { createLockingTaskExecutor } from 'shedlock'",
        "import { prismaLockProvider } from 'shedlock/orm/prisma'",
        "import { postgresSchema } from 'shedlock/postgres'",
        "import { PrismaClient } from './generated/prisma/client.js'",
        'async function main(): Promise<void> {',
        '  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) })',
        `  await prisma.$executeRawUnsafe(postgresSchema({ tableName: '${table}' }))`,
        `  const executor = createLockingTaskExecutor(prismaLockProvider(prisma, { tableName: '${table}' }))`,
        "  const outcome = await executor.executeWithLock(async () => 'ran', { name: 'prisma-consumer', lockAtMostFor: '1m' })",
        "  console.log(outcome.executed ? outcome.result : outcome.reason, typeof module === 'object' ? 'commonjs' : 'esm')",
        '  await executor.close()',
        `  await prisma.$executeRawUnsafe('DROP TABLE ${table}')`,
        '  await prisma.$disconnect()',
        '}',
        'void main()',
        '',
      ].join('\n'),
    )
    // prisma generate checks that the schema engine is installed, which it would download; the
    // prisma-client generator never runs it (Prisma 7 generates in WebAssembly).
    const generated = run(
      process.execPath,
      [join(consumer, 'node_modules', 'prisma', 'build', 'index.js'), 'generate'],
      app,
      {
        PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false',
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
      },
    )
    expect(generated.status, output(generated)).toBe(0)
    expectSuccess(tsc(join(app, 'tsconfig.json')))
    const result = run(process.execPath, ['dist/index.js'], app, { DATABASE_URL: POSTGRES_URL })
    expect(expectSuccess(result)).toBe(`ran ${type === 'module' ? 'esm' : 'commonjs'}\n`)
  })
})

describe('a CommonJS consumer', { timeout: 120_000 }, () => {
  it('compiles with module nodenext and runs: require() loads shedlock through require(esm)', () => {
    expectSuccess(tsc(tsconfig('cjs', 'tsconfig.json', { module: 'nodenext', outDir: 'out' }, ['consumer.ts'])))
    const result = run(process.execPath, ['out/consumer.js'], join(consumer, 'cjs'))
    expect(expectSuccess(result)).toBe('executed=true result=42 ms=60000 ddl=true\nmodule=commonjs\n')
  })

  it('type-checks with module node20 and commonjs (bundler and node10 resolution)', () => {
    const settings: Record<string, Record<string, unknown>> = {
      node20: { module: 'node20' },
      // TypeScript 6 resolves as bundler under module commonjs unless told otherwise.
      commonjs: { module: 'commonjs' },
      // NestJS 11's tsconfig (node10 resolution reads typesVersions); TypeScript 6 deprecates node10.
      'commonjs-node10': { module: 'commonjs', moduleResolution: 'node10', ignoreDeprecations: '6.0' },
    }
    for (const [label, options] of Object.entries(settings)) {
      const result = tsc(tsconfig('cjs', `tsconfig.${label}.json`, { ...options, noEmit: true }, ['consumer.ts']))
      expect(result.status, `${label}: ${output(result)}`).toBe(0)
    }
  })

  // TypeScript allows require(esm) from nodenext and node20 only (5.8+); the docs say so.
  it('is refused by module node16 (TS1479), as docs/typescript.md says', () => {
    const result = tsc(tsconfig('cjs', 'tsconfig.node16.json', { module: 'node16', noEmit: true }, ['consumer.ts']))
    expect(result.status).not.toBe(0)
    expect(output(result)).toMatch(/TS1479/)
  })
})

// docs/typescript.md's matrix beyond this repository's TypeScript 6: 5.8, the first that allows
// require() of an ES module under nodenext, and 7, the native compiler (devDependencies
// typescript-5.8 and typescript-7, aliases of the typescript package).
describe('other TypeScript versions', { timeout: 120_000 }, () => {
  it.each([
    ['5.8', 'typescript-5.8'],
    ['7.0', 'typescript-7'],
  ])(
    'TypeScript %s type-checks the ES module consumer (nodenext, bundler) and the CommonJS one (nodenext)',
    (version, pkg) => {
      const tscOf = (project: string) =>
        run(process.execPath, [join(root, 'node_modules', pkg, 'bin', 'tsc'), '-p', project], consumer)
      expect(
        expectSuccess(run(process.execPath, [join(root, 'node_modules', pkg, 'bin', 'tsc'), '--version'], consumer)),
      ).toContain(`Version ${version}`)
      const label = pkg.replace(/\W/g, '')
      const projects = [
        tsconfig('esm', `tsconfig.${label}-nodenext.json`, { module: 'nodenext', noEmit: true }, ['readme-example.ts']),
        tsconfig(
          'esm',
          `tsconfig.${label}-bundler.json`,
          { module: 'esnext', moduleResolution: 'bundler', noEmit: true },
          ['readme-example.ts'],
        ),
        tsconfig('cjs', `tsconfig.${label}-nodenext.json`, { module: 'nodenext', noEmit: true }, ['consumer.ts']),
      ]
      for (const project of projects) {
        const result = tscOf(project)
        expect(result.status, `${project}: ${output(result)}`).toBe(0)
      }
    },
  )
})

describe('the TypeScript code blocks of the README and docs/', { timeout: 120_000 }, () => {
  it.each(['nodenext', 'bundler'])(
    'type-check against the installed packages with moduleResolution %s',
    (resolution) => {
      const folder = `snippets-${resolution}`
      const files = writeSnippets(root, join(consumer, folder))
      expect(files.length).toBeGreaterThan(40)
      expect(files.some((f) => f.includes('legacy-decorators'))).toBe(true)
      const options = {
        ...(resolution === 'bundler' ? { module: 'esnext', moduleResolution: 'bundler' } : { module: 'nodenext' }),
        noEmit: true,
        skipLibCheck: true,
      }
      const standard = tsc(tsconfig(folder, 'tsconfig.standard.json', options, ['standard/*.ts']))
      expect(standard.status, output(standard)).toBe(0)
      const legacy = tsc(
        tsconfig(
          folder,
          'tsconfig.legacy.json',
          { ...options, experimentalDecorators: true, emitDecoratorMetadata: true },
          ['legacy-decorators/*.ts'],
        ),
      )
      expect(legacy.status, output(legacy)).toBe(0)
    },
  )

  // Blocks marked ```ts commonjs (the README's slot example and first lock, docs/typescript.md's
  // program): what a project of "type": "commonjs" compiles, where top-level await is TS1309.
  it('type-check as CommonJS (module nodenext, "type": "commonjs") where marked commonjs', () => {
    const folder = 'snippets-commonjs'
    const files = writeSnippets(root, join(consumer, folder)).filter((f) => f.includes(join(folder, 'commonjs')))
    expect(files.some((f) => f.includes('README.md-'))).toBe(true)
    expect(files.some((f) => f.includes('docs-typescript.md-'))).toBe(true)
    const project = tsconfig(
      folder,
      'tsconfig.commonjs.json',
      { module: 'nodenext', noEmit: true, skipLibCheck: true },
      ['commonjs/*.ts'],
    )
    const result = tsc(project)
    expect(result.status, output(result)).toBe(0)
    // The same project refuses a top-level await: the check would catch one in a marked block.
    writeFileSync(join(consumer, folder, 'commonjs', 'top-level-await.ts'), 'await Promise.resolve()\nexport {}\n')
    const refused = tsc(project)
    expect(output(refused)).toMatch(/top-level-await\.ts.*TS1309/)
  })
})
