// The parts of an etcd3 client the provider and the inspector call, typed structurally: any client
// with these methods works, and shedlock imports no etcd3.

/** One operation of a transaction: an etcd3 `PutBuilder` or `DeleteBuilder`. Never awaited here (builders are thenables that run themselves). */
export interface EtcdOperation {
  op(): Promise<object>
}

/** The part of an etcd3 `PutBuilder` this provider calls. */
export interface EtcdPutBuilder extends EtcdOperation {
  value(value: string): EtcdPutBuilder
  lease(id: string): EtcdPutBuilder
}

/** The part of an etcd3 `DeleteBuilder` this provider calls. */
export interface EtcdDeleteBuilder {
  key(key: string): EtcdOperation
}

/** The part of an etcd3 `ComparatorBuilder` (a transaction) this provider calls. */
export interface EtcdTransaction {
  then(...operations: EtcdOperation[]): EtcdTransaction
  commit(): Promise<EtcdTransactionResult>
}

/** The part of an etcd3 `ITxnResponse` this provider reads. */
export interface EtcdTransactionResult {
  succeeded: boolean
  /** `revision`: the store's revision once the transaction applied, as a decimal string (etcd's int64). */
  header?: { revision?: string | number }
}

/** The part of an etcd3 `Lease` this provider calls. */
export interface EtcdLease {
  /** Resolves to the lease ID once etcd granted it. */
  grant(): Promise<string>
  /** Revokes the lease, deleting the keys attached to it. */
  revoke(): Promise<void>
}

/**
 * The part of an `Etcd3` client (etcd3 1.x) that this provider calls. We don't import etcd3: any
 * client with these methods works. The provider never closes it.
 */
export interface EtcdClient {
  lease(ttl: number, options: { autoKeepAlive: boolean }): EtcdLease
  if(key: string, column: 'Version' | 'Value', cmp: '==', value: string | number): EtcdTransaction
  put(key: string): EtcdPutBuilder
  delete(): EtcdDeleteBuilder
}
