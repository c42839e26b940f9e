// shedlock/nats: the provider, the inspector, and the key format shared with Java ShedLock.
export { NATS_LOCK_BUCKET, type NatsKvEntry, natsLockKey, natsLockName } from './format.ts'
export { type NatsInspectableKv, type NatsLockInspectorOptions, natsLockInspector } from './inspector.ts'
export { type NatsKv, type NatsLockProviderOptions, natsLockProvider } from './provider.ts'
