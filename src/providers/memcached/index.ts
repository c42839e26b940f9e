// shedlock/memcached: the provider, its key encoding and the inspector.
export { memcachedLockKey } from './format.ts'
export {
  type MemcachedInspectorClient,
  type MemcachedLockInspectorOptions,
  memcachedLockInspector,
} from './inspector.ts'
export { type MemcachedClient, type MemcachedLockProviderOptions, memcachedLockProvider } from './provider.ts'
