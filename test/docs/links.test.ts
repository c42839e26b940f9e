import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const script = join(root, 'scripts', 'check-docs.mjs')

function checkDocs(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const { status, stdout, stderr } = spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' })
  return { status, stdout, stderr }
}

describe('docs', () => {
  it('every link of every Markdown file works (node scripts/check-docs.mjs)', () => {
    const result = checkDocs()
    expect(result.stderr + result.stdout).not.toMatch(/broken link/)
    expect(result.status).toBe(0)
  })

  it('lists the TypeScript code blocks with their file and line (--snippets-only-list)', () => {
    const result = checkDocs('--snippets-only-list')
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(/^--- README\.md:\d+ ts \(\d+ lines\)$/m)
    expect(result.stdout).toMatch(/^--- docs\/usage\.md:\d+ ts \(\d+ lines\)$/m)
  })
})

describe('the link checker', () => {
  const fixture = mkdtempSync(join(tmpdir(), 'shedlock-check-docs-'))
  afterAll(() => rmSync(fixture, { recursive: true, force: true }))
  const write = (path: string, text: string): void => {
    mkdirSync(dirname(join(fixture, path)), { recursive: true })
    writeFileSync(join(fixture, path), text)
  }
  write('package.json', JSON.stringify({ name: 'fixture', files: ['dist', 'docs', 'CONTRIBUTING.md'] }))
  write('examples/README.md', '# Examples\n\n[back](../README.md)\n')
  write('node_modules/some/README.md', '[ignored](missing.md)\n')
  write(
    'docs/a.md',
    [
      '# Page A',
      '',
      '## What holds, and why: `signal`',
      '',
      '## Repeated',
      '',
      '## Repeated',
      '',
      'Setext heading',
      '--------------',
      '',
      '[ok](#what-holds-and-why-signal) [ok](#repeated-1) [ok](#setext-heading) [ok](../README.md#fixture)',
      '[bad anchor](#nope)',
      '```ts',
      '[not a link](missing.md)',
      'const x: number = 1',
      '```',
      'Code `[not a link](missing.md)` in a span.',
      '',
    ].join('\n'),
  )
  write(
    'README.md',
    [
      '# Fixture',
      '',
      '[ok](docs/a.md) [ok](docs/a.md#repeated) [ok](https://github.com/lukas-krecan/ShedLock) [ok](https://example.com/x)',
      '[missing file](docs/b.md)',
      '[missing anchor](docs/a.md#page-b)',
      '[repository](https://github.com/someone/shedlock/blob/main/docs/a.md)',
      '[root-relative](/docs/a.md)',
      '[not shipped](examples/README.md)',
      '',
    ].join('\n'),
  )
  write('packages/plugin/package.json', JSON.stringify({ name: '@fixture/plugin', files: ['dist'] }))
  write('packages/plugin/README.md', '[outside its package](../../docs/a.md)\n')

  it('lists each broken link with its file and line, and exits 1', () => {
    const result = spawnSync(process.execPath, [script, '--root', fixture], { encoding: 'utf8' })
    expect(result.status).toBe(1)
    const lines = result.stderr
      .split('\n')
      .filter((line) => line.startsWith('  '))
      .map((line) => line.trim())
    expect(lines.map((line) => line.split(': ')[0])).toEqual([
      'README.md:4',
      'README.md:5',
      'README.md:6',
      'README.md:7',
      'README.md:8',
      'docs/a.md:13',
      'packages/plugin/README.md:1',
    ])
    expect(lines[0]).toMatch(/no such file: docs\/b\.md/)
    expect(lines[1]).toMatch(/no heading with anchor #page-b in docs\/a\.md/)
    expect(lines[2]).toMatch(/absolute link to a repository/)
    expect(lines[3]).toMatch(/root-relative/)
    expect(lines[4]).toMatch(/not shipped in the npm package fixture/)
    expect(lines[6]).toMatch(/leaves the npm package @fixture\/plugin/)
  })

  it('lists the TypeScript blocks of the fixture', () => {
    const result = spawnSync(process.execPath, [script, '--root', fixture, '--snippets-only-list'], {
      encoding: 'utf8',
    })
    expect(result.status).toBe(0)
    expect(result.stdout).toBe('--- docs/a.md:15 ts (2 lines)\n[not a link](missing.md)\nconst x: number = 1\n')
  })
})

describe('the snippet list', () => {
  const fixture = mkdtempSync(join(tmpdir(), 'shedlock-check-docs-modules-'))
  afterAll(() => rmSync(fixture, { recursive: true, force: true }))
  const list = (markdown: string) => {
    writeFileSync(join(fixture, 'README.md'), markdown)
    return spawnSync(process.execPath, [script, '--root', fixture, '--snippets-only-list'], { encoding: 'utf8' })
  }

  it('shows the module systems named after the language (```ts esm commonjs)', () => {
    const result = list('```ts esm commonjs\nconst a = 1\n```\n\n```typescript commonjs\nconst b = 2\n```\n')
    expect(result.status).toBe(0)
    expect(result.stdout).toBe(
      '--- README.md:2 ts esm commonjs (1 lines)\nconst a = 1\n--- README.md:6 typescript commonjs (1 lines)\nconst b = 2\n',
    )
  })

  it('refuses any other word there, so that a typo does not drop a check', () => {
    const result = list('```ts cjs\nconst a = 1\n```\n')
    expect(result.status).toBe(1)
    expect(result.stderr).toMatch(/README\.md:1: unknown word "cjs" after ts: only esm and commonjs/)
  })
})
