// shedlock/redis: the provider, the RedisCommands port with its adapters, the inspector and the run ledger.
export { type RedisClient, type RedisClientLike, toRedisCommands } from './client.ts'
export type { RedisCommand, RedisCommands, ReplicatedSet } from './commands.ts'
export { fromIoredis, type IoredisClient } from './ioredis-commands.ts'
export { fromNodeRedis, type NodeRedisClient, type NodeRedisEvalOptions } from './node-redis-commands.ts'
export { type RedisLockInspectorOptions, redisLockInspector } from './inspector.ts'
export { type RedisLockProviderOptions, redisLockProvider } from './provider.ts'
export { type RedisRunLedgerOptions, redisRunLedger } from './run-ledger.ts'
