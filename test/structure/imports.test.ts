import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

// The layers of src/ and the edges between them, read from the source: every static import or
// re-export that brings a value at run time (type-only ones vanish from the build, and dynamic
// imports are how the CLI loads a store's driver and admin on demand).

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : []
  })
}

/** The files `file` imports from, as paths relative to src/: values only, or with `types` type-only imports too. */
function importsOf(file: string, types: boolean): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
  const targets: string[] = []
  for (const statement of source.statements) {
    let specifier: ts.Expression | undefined
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause
      if (clause?.isTypeOnly && !types) continue
      const bindings = clause?.namedBindings
      // `import { type A, type B } from` brings no value either (a bare `import 'x'` does).
      if (
        !types &&
        clause &&
        !clause.name &&
        bindings &&
        ts.isNamedImports(bindings) &&
        bindings.elements.length > 0 &&
        bindings.elements.every((e) => e.isTypeOnly)
      )
        continue
      specifier = statement.moduleSpecifier
    } else if (ts.isExportDeclaration(statement)) {
      if ((statement.isTypeOnly && !types) || !statement.moduleSpecifier) continue
      const clause = statement.exportClause
      if (
        !types &&
        clause &&
        ts.isNamedExports(clause) &&
        clause.elements.length > 0 &&
        clause.elements.every((e) => e.isTypeOnly)
      )
        continue
      specifier = statement.moduleSpecifier
    }
    if (specifier && ts.isStringLiteral(specifier) && specifier.text.startsWith('.')) {
      targets.push(relative(SRC, resolve(dirname(file), specifier.text)))
    }
  }
  return targets
}

const files = sourceFiles(SRC)
// Value imports: the layering rules. Every import, type-only ones included: the cycles, since a
// circle of types is still two files a reader must hold in mind at once.
const graph = new Map(files.map((file) => [relative(SRC, file), importsOf(file, false)]))
const fullGraph = new Map(files.map((file) => [relative(SRC, file), importsOf(file, true)]))

/** The strongly connected components of more than one file (or a file importing itself) of `graph`: the import cycles. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (node: string): void => {
    index.set(node, counter)
    low.set(node, counter++)
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue
      if (!index.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!))
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.push(member)
      } while (member !== node)
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort())
    }
  }
  for (const node of graph.keys()) if (!index.has(node)) visit(node)
  return found
}

/** Every value import (or, on `fullGraph`, every import) from a file under `from` to a file under one of `to`. */
function edges(from: string, to: readonly string[], imports: ReadonlyMap<string, readonly string[]> = graph): string[] {
  return [...imports].flatMap(([file, targets]) =>
    file.startsWith(from)
      ? targets.filter((t) => to.some((prefix) => t.startsWith(prefix))).map((t) => `${file} -> ${t}`)
      : [],
  )
}

describe('imports of src/', () => {
  it('reads the source tree', () => {
    expect(graph.size).toBeGreaterThan(50)
    expect(graph.get('index.ts')).toContain('core/locking-task-executor.ts')
  })

  it('have no cycles, type-only imports included', () => {
    expect(cycles(fullGraph)).toEqual([])
  })

  it('core depends on nothing but core', () => {
    expect(
      edges('core/', ['support/', 'providers/', 'integrations/', 'cli/', 'testing/', 'status/', 'dashboard/']),
    ).toEqual([])
  })

  it('support code depends on no store, integration, CLI, status model, dashboard or test kit', () => {
    expect(edges('support/', ['providers/', 'integrations/', 'cli/', 'testing/', 'status/', 'dashboard/'])).toEqual([])
  })

  it('integrations and the test kit use no store', () => {
    expect([...edges('integrations/', ['providers/', 'cli/']), ...edges('testing/', ['providers/', 'cli/'])]).toEqual(
      [],
    )
  })

  // Type-only imports count here: the dashboard is a public entry, and its .d.ts must not reach
  // into the CLI, nor into the stores (the registry would bring every store's admin module along).
  it('the status model reads core and support only; the dashboard no CLI or store code, type-only imports included', () => {
    const status = [...fullGraph].flatMap(([file, targets]) =>
      file.startsWith('status/')
        ? targets.filter((t) => !/^(core|support|status)\//.test(t)).map((t) => `${file} -> ${t}`)
        : [],
    )
    expect([...status, ...edges('dashboard/', ['cli/', 'providers/'], fullGraph)]).toEqual([])
  })

  it('a store imports no other store (each has one home)', () => {
    const crossing = [...graph].flatMap(([file, targets]) => {
      const store = /^providers\/([^/]+)\//.exec(file)?.[1]
      if (!store) return []
      return targets
        .filter((t) => t.startsWith('providers/') && !t.startsWith(`providers/${store}/`))
        .map((t) => `${file} -> ${t}`)
    })
    expect(crossing).toEqual([])
  })
})
