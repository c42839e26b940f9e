import { Buffer } from 'node:buffer'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import * as runtime from '@prisma/client/runtime/client'

const clientPackage = createRequire(import.meta.url).resolve('@prisma/client/package.json')
const clientVersion = (JSON.parse(readFileSync(clientPackage, 'utf8')) as { version: string }).version
// The query compiler a generated client loads: query_compiler_fast_bg in later 7.x releases,
// query_compiler_bg in 7.0 (scripts/oldest-drivers.sh runs the Prisma tests on 7.0.0).
const compiler = existsSync(join(dirname(clientPackage), 'runtime', 'query_compiler_fast_bg.postgresql.mjs'))
  ? 'query_compiler_fast_bg'
  : 'query_compiler_bg'

// A Prisma Client class without `prisma generate` (which downloads an engine, offline impossible):
// the configuration a generated client passes to the runtime, for a schema without models. Raw
// queries are all the adapter uses.
export function prismaClientClass(provider: 'postgresql' | 'mysql'): new (options: {
  adapter: unknown
}) => {
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>
  $queryRawUnsafe(query: string, ...values: unknown[]): Promise<unknown>
  $transaction<T>(body: (tx: never) => Promise<T>): Promise<T>
  $extends(extension: object): { $transaction<T>(body: (tx: never) => Promise<T>): Promise<T> }
  $disconnect(): Promise<void>
} {
  const config = {
    previewFeatures: [],
    clientVersion,
    engineVersion: 'none',
    activeProvider: provider,
    inlineSchema: `datasource db {\n  provider = "${provider}"\n}\n`,
    runtimeDataModel: { models: {}, enums: {}, types: {} },
    parameterizationSchema: { strings: [], graph: 'AAAA' },
    compilerWasm: {
      getRuntime: async () => await import(`@prisma/client/runtime/${compiler}.${provider}.mjs`),
      getQueryCompilerWasmModule: async () => {
        const { wasm } = (await import(`@prisma/client/runtime/${compiler}.${provider}.wasm-base64.mjs`)) as {
          wasm: string
        }
        // The lib settings have no DOM types: WebAssembly is reached through globalThis.
        const { WebAssembly: wasmApi } = globalThis as unknown as {
          WebAssembly: { Module: new (bytes: Uint8Array) => unknown }
        }
        return new wasmApi.Module(Buffer.from(wasm, 'base64'))
      },
      importName: `./${compiler}.js`,
    },
  }
  return runtime.getPrismaClient(config as never) as never
}
