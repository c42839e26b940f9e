// Rooms a reader can hold in mind (issue 28): no source file over 400 lines, no function over 150.
// A file or function that grows past them is split by what it does, as CONTRIBUTING.md says.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '..', '..')
const MAX_FILE_LINES = 400
const MAX_FUNCTION_LINES = 150

const sources = (readdirSync(join(ROOT, 'src'), { recursive: true }) as string[])
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(ROOT, 'src', f))

const lineCount = (text: string): number => text.split('\n').length - (text.endsWith('\n') ? 1 : 0)

/** Every function with a body (declarations, methods, accessors, arrows, expressions): `file:line (n lines)`. */
function longFunctions(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const last = source.getLineAndCharacterOfPosition(node.end).line
      const lines = last - first + 1
      if (lines > MAX_FUNCTION_LINES) found.push(`${relative(ROOT, file)}:${first + 1} (${lines} lines)`)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

describe('source sizes', () => {
  it(`no file in src is longer than ${MAX_FILE_LINES} lines`, () => {
    const long = sources
      .map((file) => ({ file: relative(ROOT, file), lines: lineCount(readFileSync(file, 'utf8')) }))
      .filter((f) => f.lines > MAX_FILE_LINES)
      .map((f) => `${f.file} (${f.lines} lines)`)
    expect(long).toEqual([])
  })

  it(`no function in src is longer than ${MAX_FUNCTION_LINES} lines`, () => {
    expect(sources.flatMap((file) => longFunctions(file, readFileSync(file, 'utf8')))).toEqual([])
  })

  it('the function check sees a long function (it can fail)', () => {
    const body = Array.from({ length: MAX_FUNCTION_LINES }, (_, i) => `  const v${i} = ${i}`).join('\n')
    expect(longFunctions('x.ts', `export const f = () => {\n${body}\n}\n`)).toEqual(['x.ts:1 (152 lines)'])
  })
})
