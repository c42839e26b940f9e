// shedlock/cloudflare-do: the Durable Object class that holds the locks, the provider and the inspector that call it.
export type {
  DurableObjectLockNamespace,
  DurableObjectLockOptions,
  DurableObjectLockResponse,
  DurableObjectLockStub,
} from './client.ts'
export { type DurableObjectLockInspectorOptions, durableObjectLockInspector } from './inspector.ts'
export { type DurableObjectLockState, type DurableObjectLockStorage, ShedLockDurableObject } from './object.ts'
export { type DurableObjectLockProviderOptions, durableObjectLockProvider } from './provider.ts'
