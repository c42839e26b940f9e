// shedlock/redis: the provider, the RedisCommands port with its adapters, the inspector and the run ledger.
export {
  fromIoredis,
  fromNodeRedis,
  type IoredisClient,
  type NodeRedisClient,
  type NodeRedisEvalOptions,
  type RedisClient,
  type RedisClientLike,
  type RedisCommand,
  type RedisCommands,
  type ReplicatedSet,
  toRedisCommands,
} from './commands.ts'
export { type RedisLockInspectorOptions, redisLockInspector } from './inspector.ts'
export { type RedisLockProviderOptions, redisLockProvider } from './provider.ts'
export { type RedisRunLedgerOptions, redisRunLedger } from './run-ledger.ts'
