// shedlock/etcd: the provider, the parts of an etcd3 client it calls, and the inspector.
export { type EtcdInspectorClient, type EtcdKeyValue, type EtcdLockInspectorOptions, type EtcdRangeBuilder, etcdLockInspector } from './inspector.ts'
export {
  type EtcdClient,
  type EtcdDeleteBuilder,
  type EtcdLease,
  type EtcdLockProviderOptions,
  type EtcdOperation,
  type EtcdPutBuilder,
  type EtcdTransaction,
  etcdLockProvider,
} from './provider.ts'
