// shedlock/dynamodb: the provider, the inspector, and the lock table shared with Java ShedLock.
export { type DynamoDBLockInspectorOptions, dynamoDBLockInspector } from './inspector.ts'
export {
  type CreateDynamoDBLockTableOptions,
  createDynamoDBLockTable,
  type DynamoDBLockProviderOptions,
  dynamoDBLockProvider,
} from './provider.ts'
export type {
  DynamoDBCreateTableInput,
  DynamoDBDeleteItemInput,
  DynamoDBGetItemInput,
  DynamoDBInspectorLib,
  DynamoDBLib,
  DynamoDBNumberValue,
  DynamoDBScanInput,
  DynamoDBSendClient,
  DynamoDBStringValue,
  DynamoDBUpdateItemInput,
} from './sdk.ts'
