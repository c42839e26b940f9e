import { LockConfigurationError } from '../../core/errors.ts'
import { awsCommandLoader } from '../../support/aws-sdk.ts'

// The AWS SDK v3 as the provider and the inspector use it: the client's one method, the command
// classes (imported on first use, or passed as `lib`), and the inputs they are built with.

const SDK = '@aws-sdk/client-dynamodb'

/**
 * The part of an AWS SDK v3 `DynamoDBClient` (`@aws-sdk/client-dynamodb` 3.x) that shedlock
 * calls: `send(command)`. We don't import the SDK statically; pass your client as it is. A
 * `DynamoDBDocumentClient` is not one: it would re-marshal the attribute values.
 */
export interface DynamoDBSendClient {
  send(command: object): Promise<unknown>
}

/** A string attribute value, the type of the lock item's key and times. */
export interface DynamoDBStringValue {
  S: string
}

/** A number attribute value (a decimal string), the type of the item's `fencingToken`. */
export interface DynamoDBNumberValue {
  N: string
}

/** The input of `UpdateItemCommand` that the provider builds. */
export interface DynamoDBUpdateItemInput {
  TableName: string
  Key: Record<string, DynamoDBStringValue>
  UpdateExpression: string
  ConditionExpression: string
  ExpressionAttributeValues: Record<string, DynamoDBStringValue | DynamoDBNumberValue>
  /** `UPDATED_NEW` on an acquisition, which reads its `fencingToken` back from the write. */
  ReturnValues?: 'UPDATED_NEW'
}

/** The input of `CreateTableCommand` that `createDynamoDBLockTable` builds. */
export interface DynamoDBCreateTableInput {
  TableName: string
  KeySchema: { AttributeName: string; KeyType: 'HASH' }[]
  AttributeDefinitions: { AttributeName: string; AttributeType: 'S' }[]
  BillingMode: 'PAY_PER_REQUEST'
}

/** The input of `ScanCommand` that the inspector builds: one page of the table, read consistently, filtered by name prefix (and expiry). */
export interface DynamoDBScanInput {
  TableName: string
  ConsistentRead: true
  ExclusiveStartKey?: Record<string, DynamoDBStringValue>
  FilterExpression?: string
  ProjectionExpression?: string
  ExpressionAttributeNames?: Record<string, string>
  ExpressionAttributeValues?: Record<string, DynamoDBStringValue>
}

/** The input of `DeleteItemCommand` that the inspector builds: a conditional delete of one expired item. */
export interface DynamoDBDeleteItemInput {
  TableName: string
  Key: Record<string, DynamoDBStringValue>
  ConditionExpression: string
  ExpressionAttributeValues: Record<string, DynamoDBStringValue>
}

/** The input of `GetItemCommand` that the inspector builds. */
export interface DynamoDBGetItemInput {
  TableName: string
  Key: Record<string, DynamoDBStringValue>
  ConsistentRead: true
}

/**
 * The command classes used, as `@aws-sdk/client-dynamodb` exports them. Pass the module as
 * `lib` when it cannot be imported by name (bundlers, several SDK copies):
 * `import * as lib from '@aws-sdk/client-dynamodb'`.
 */
export interface DynamoDBLib {
  UpdateItemCommand: new (input: DynamoDBUpdateItemInput) => object
  DescribeTableCommand: new (input: { TableName: string }) => object
  CreateTableCommand: new (input: DynamoDBCreateTableInput) => object
}

/** The command classes the inspector uses, as `@aws-sdk/client-dynamodb` exports them (`import * as lib from '@aws-sdk/client-dynamodb'`). */
export interface DynamoDBInspectorLib {
  ScanCommand: new (input: DynamoDBScanInput) => object
  GetItemCommand: new (input: DynamoDBGetItemInput) => object
  UpdateItemCommand: new (input: DynamoDBUpdateItemInput) => object
  DeleteItemCommand: new (input: DynamoDBDeleteItemInput) => object
}

/**
 * @throws LockConfigurationError unless `client` has `send(command)`.
 */
export function checkClient(client: unknown): asserts client is DynamoDBSendClient {
  if (!client || typeof (client as Partial<DynamoDBSendClient>).send !== 'function') {
    throw new LockConfigurationError(
      'dynamodb: pass your DynamoDBClient (from @aws-sdk/client-dynamodb) as client: an object with send(command)',
    )
  }
}

/**
 * Returns a loader of the command classes `needed`: `lib` as given, or the SDK imported once, on first use.
 * @throws LockConfigurationError when `lib` lacks one of them.
 */
export function commandLoader<L extends object>(
  lib: L | undefined,
  needed: readonly (keyof L & string)[],
): () => Promise<L> {
  return awsCommandLoader('dynamodb', SDK, () => import('@aws-sdk/client-dynamodb'), lib, needed)
}

export { errorName, SdkLoadError } from '../../support/aws-sdk.ts'
