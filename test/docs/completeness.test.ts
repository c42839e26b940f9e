// The docs against what they describe: every page listed in docs/README.md, every command the
// CLI registers in docs/cli.md's table, every skip reason of executeWithLock() in docs/usage.md.
// Each list is read from the code or the tree, never written out here, so that a new page,
// command or reason fails this test until the docs name it.
import { readdirSync, readFileSync } from 'node:fs'
import { join, posix, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import type { Command } from '../../src/cli/command.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
const read = (path: string): string => readFileSync(join(root, path), 'utf8')

/** Every Markdown file under `folder`, relative to it, with `/`. */
function markdownUnder(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.md'))
    .map((path) => path.split(sep).join('/'))
    .sort()
}

/** The relative link targets of a Markdown text, without their anchors. */
function linksOf(markdown: string): string[] {
  return [...markdown.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)]
    .map((m) => m[1]!)
    .filter((target) => !/^[a-z]+:/i.test(target))
}

describe('docs/README.md', () => {
  it('links every page under docs/', () => {
    const linked = new Set(linksOf(read('docs/README.md')).map((target) => posix.normalize(target)))
    const pages = markdownUnder('docs').filter((page) => page !== 'README.md')
    expect(pages.length).toBeGreaterThan(20)
    expect(pages.filter((page) => !linked.has(page))).toEqual([])
  })
})

/**
 * The commands `shedlock` registers: the identifiers of the `commands` array of src/cli/main.ts,
 * each imported from the module main.ts imports it from. Hidden ones (the demo's worker) are not
 * for users, as --help says.
 */
async function registeredCommands(): Promise<Command[]> {
  const source = read('src/cli/main.ts')
  const array = /const commands: readonly Command\[\] = \[([^\]]*)\]/.exec(source)
  if (!array)
    throw new Error(
      'src/cli/main.ts: no `const commands: readonly Command[] = [...]` found; update this test to the registry',
    )
  const names = array[1]!
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean)
  const commands: Command[] = []
  for (const name of names) {
    const from = new RegExp(`^import \\{[^}]*\\b${name}\\b[^}]*\\} from '(\\./[^']+)'`, 'm').exec(source)
    if (!from) throw new Error(`src/cli/main.ts: where is ${name} imported from?`)
    const module = (await import(pathToFileURL(join(root, 'src', 'cli', from[1]!)).href)) as Record<string, Command>
    commands.push(module[name]!)
  }
  return commands
}

describe('docs/cli.md', () => {
  it('describes every command the CLI registers in its table of commands, and only those', async () => {
    const commands = (await registeredCommands()).filter((command) => !command.hidden).map((command) => command.name)
    expect(commands).toContain('run')
    const rows = [...read('docs/cli.md').matchAll(/^\| `shedlock ([a-z-]+)` \|/gm)].map((m) => m[1])
    expect(rows.toSorted()).toEqual(commands.toSorted())
  })
})

describe('docs/usage.md', () => {
  it('names every skip reason of executeWithLock() (the SkipReason type), and only those', () => {
    const source = read('src/core/task.ts')
    const type = /export type SkipReason =([^\n]+)/.exec(source)
    if (!type) throw new Error('src/core/task.ts: no `export type SkipReason = ...` found')
    const reasons = [...type[1]!.matchAll(/'([^']+)'/g)].map((m) => m[1])
    expect(reasons).toContain('held')
    const documented = [...read('docs/usage.md').matchAll(/^- `reason: '([^']+)'`/gm)].map((m) => m[1])
    expect(documented.toSorted()).toEqual(reasons.toSorted())
  })
})
