import { Buffer } from 'node:buffer'
import * as runtime from '@prisma/client/runtime/client'

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
    clientVersion: '7.10.1',
    engineVersion: 'none',
    activeProvider: provider,
    inlineSchema: `datasource db {\n  provider = "${provider}"\n}\n`,
    runtimeDataModel: { models: {}, enums: {}, types: {} },
    parameterizationSchema: { strings: [], graph: 'AAAA' },
    compilerWasm: {
      getRuntime: async () => await import(`@prisma/client/runtime/query_compiler_fast_bg.${provider}.mjs`),
      getQueryCompilerWasmModule: async () => {
        const { wasm } = (await import(`@prisma/client/runtime/query_compiler_fast_bg.${provider}.wasm-base64.mjs`)) as { wasm: string }
        // The lib settings have no DOM types: WebAssembly is reached through globalThis.
        const { WebAssembly: wasmApi } = globalThis as unknown as { WebAssembly: { Module: new (bytes: Uint8Array) => unknown } }
        return new wasmApi.Module(Buffer.from(wasm, 'base64'))
      },
      importName: './query_compiler_fast_bg.js',
    },
  }
  return runtime.getPrismaClient(config as never) as never
}
