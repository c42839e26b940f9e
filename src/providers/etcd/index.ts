// shedlock/etcd: the provider, the parts of an etcd3 client it calls, and the inspector.
export {
  type EtcdInspectorClient,
  type EtcdKeyValue,
  type EtcdLockInspectorOptions,
  type EtcdRangeBuilder,
  etcdLockInspector,
} from './inspector.ts'
export type {
  EtcdClient,
  EtcdDeleteBuilder,
  EtcdLease,
  EtcdOperation,
  EtcdPutBuilder,
  EtcdTransaction,
  EtcdTransactionResult,
} from './client.ts'
export { type EtcdLockProviderOptions, etcdLockProvider } from './provider.ts'
