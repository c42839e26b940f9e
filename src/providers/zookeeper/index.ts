// shedlock/zookeeper: the provider, the inspector, and the node names shared with Java ShedLock.
export type { ZooKeeperStat } from './client.ts'
export { zookeeperLockName, zookeeperNodeName } from './format.ts'
export {
  type ZooKeeperInspectorClient,
  type ZooKeeperLockInspectorOptions,
  zookeeperLockInspector,
} from './inspector.ts'
export {
  type ZooKeeperClient,
  type ZooKeeperLockProviderOptions,
  type ZooKeeperTransaction,
  zookeeperLockProvider,
} from './provider.ts'
