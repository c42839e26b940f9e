// shedlock/deno-kv: the provider, the parts of a Deno.Kv it calls, and the inspector.
export { type DenoKvLockInspectorOptions, denoKvLockInspector } from './inspector.ts'
export { type DenoKvLockProviderOptions, denoKvLockProvider } from './provider.ts'
export type { DenoKvLockAtomic, DenoKvLockDatabase, DenoKvLockEntry, DenoKvLockKey, DenoKvLockValue } from './format.ts'
