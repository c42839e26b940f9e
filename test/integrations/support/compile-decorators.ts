import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import ts from 'typescript'

export type DecoratorMode = 'standard' | 'legacy'

const dirs: string[] = []

/**
 * Compiles one TypeScript file with tsc's emitter in the given decorator mode and imports the
 * result. vitest's own transform cannot do both: it leaves standard decorators as they are, which
 * Node 20 does not run. Type-only imports are erased, so the file must take the library as an
 * argument, which keeps one copy of the lock context.
 */
export async function importCompiled<T>(file: URL, mode: DecoratorMode): Promise<T> {
  const source = readFileSync(file, 'utf8')
  const { outputText, diagnostics } = ts.transpileModule(source, {
    fileName: file.pathname,
    reportDiagnostics: true,
    compilerOptions: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      experimentalDecorators: mode === 'legacy',
      emitDecoratorMetadata: mode === 'legacy',
      useDefineForClassFields: true,
      verbatimModuleSyntax: false,
    },
  })
  if (diagnostics?.length)
    throw new Error(
      ts.formatDiagnostics(diagnostics, {
        getCanonicalFileName: (f) => f,
        getCurrentDirectory: () => '',
        getNewLine: () => '\n',
      }),
    )
  const dir = mkdtempSync(join(tmpdir(), `shedlock-decorators-${mode}-`))
  dirs.push(dir)
  const out = join(dir, 'classes.mjs')
  writeFileSync(out, outputText)
  return (await import(pathToFileURL(out).href)) as T
}

/** Removes what {@link importCompiled} wrote. */
export function removeCompiled(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}
