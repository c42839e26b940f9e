import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** One ```ts code block of a Markdown file. */
export interface Snippet {
  /** Markdown file, relative to the repository, with `/`. */
  file: string
  /** Line of the block's first line of code. */
  line: number
  code: string
  /**
   * The module systems it is type-checked as: `esm` unless the fence names others after the
   * language (```` ```ts esm commonjs ````).
   */
  modules: ('esm' | 'commonjs')[]
}

/**
 * Every ```ts / ```typescript block of the repository's Markdown files, as
 * `node scripts/check-docs.mjs --snippets-only-list` lists them (one extraction for both).
 */
export function snippetsOf(root: string): Snippet[] {
  const result = spawnSync(process.execPath, [join(root, 'scripts', 'check-docs.mjs'), '--snippets-only-list'], {
    encoding: 'utf8',
  })
  if (result.status !== 0) throw new Error(`check-docs --snippets-only-list failed: ${result.stderr}`)
  const lines = result.stdout.split('\n')
  const snippets: Snippet[] = []
  for (let i = 0; i < lines.length; i++) {
    const header = /^--- (.+):(\d+) (?:ts|typescript)((?: \w+)*) \((\d+) lines\)$/.exec(lines[i]!)
    if (!header) continue
    const count = Number(header[4])
    const words = header[3]!.trim().split(' ').filter(Boolean) as Snippet['modules']
    snippets.push({
      file: header[1]!,
      line: Number(header[2]),
      code: lines.slice(i + 1, i + 1 + count).join('\n'),
      modules: words.length === 0 ? ['esm'] : words,
    })
    i += count
  }
  return snippets
}

/**
 * Writes each snippet as its own module into `folder`, named after its file and line
 * (`docs-usage.md-10.ts`), so that a compiler error points at the block. ES module snippets go
 * under a package.json of `"type": "module"`: NestJS ones into `folder/legacy-decorators` (Nest's
 * decorators need `experimentalDecorators`), the others into `folder/standard` (TC39
 * decorators, the default). Snippets marked `commonjs` go (too) into `folder/commonjs`, under a
 * package.json of `"type": "commonjs"`. Returns the files written.
 */
export function writeSnippets(root: string, folder: string): string[] {
  mkdirSync(folder, { recursive: true })
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ private: true, type: 'module' }))
  for (const group of ['standard', 'legacy-decorators', 'commonjs']) mkdirSync(join(folder, group), { recursive: true })
  writeFileSync(join(folder, 'commonjs', 'package.json'), JSON.stringify({ private: true, type: 'commonjs' }))
  return snippetsOf(root).flatMap(({ file, line, code, modules }) =>
    modules.map((kind) => {
      const group = kind === 'commonjs' ? 'commonjs' : /from '@nestjs\//.test(code) ? 'legacy-decorators' : 'standard'
      const path = join(folder, group, `${file.replaceAll('/', '-')}-${line}.ts`)
      // `export {}` keeps a block without imports a module, so top-level await and names stay its
      // own; in a CommonJS file it is an export like any other (and top-level await stays TS1309).
      writeFileSync(path, `${code}\nexport {}\n`)
      return path
    }),
  )
}
