// The drivers' types the SQLite tests need, and the compiler's check that each driver's
// connection is a SqliteDatabase (outside the test file, which exports nothing).
import type BetterSqlite3 from 'better-sqlite3'
import type Libsql from 'libsql'
import type { SqliteDatabase } from '../../../src/providers/sqlite/index.ts'

/**
 * `node:sqlite` as @types/node 22+ declares it (the parts used here). This repository pins
 * @types/node 20, which has no `node:sqlite`, so the declaration is repeated: `DatabaseSync` is
 * passed to the provider in provider.test.ts without a cast, as better-sqlite3's `Database` is.
 */
type NodeSqliteInput = null | number | bigint | string | NodeJS.ArrayBufferView
type NodeSqliteOutput = null | number | bigint | string | Uint8Array
interface NodeSqliteChanges {
  changes: number | bigint
  lastInsertRowid: number | bigint
}
interface NodeSqliteStatement {
  run(...anonymousParameters: NodeSqliteInput[]): NodeSqliteChanges
  run(namedParameters: Record<string, NodeSqliteInput>, ...anonymousParameters: NodeSqliteInput[]): NodeSqliteChanges
  get(...anonymousParameters: NodeSqliteInput[]): Record<string, NodeSqliteOutput> | undefined
  get(
    namedParameters: Record<string, NodeSqliteInput>,
    ...anonymousParameters: NodeSqliteInput[]
  ): Record<string, NodeSqliteOutput> | undefined
}
export interface NodeSqliteDatabase {
  prepare(sql: string): NodeSqliteStatement
  exec(sql: string): void
  close(): void
}
export interface NodeSqliteModule {
  DatabaseSync: new (
    path: string,
    options?: { open?: boolean; readOnly?: boolean; timeout?: number },
  ) => NodeSqliteDatabase
}

// Each driver's connection is a SqliteDatabase, checked by the compiler.
type IsSqliteDatabase<T extends SqliteDatabase> = T
export type BetterSqlite3IsSqliteDatabase = IsSqliteDatabase<BetterSqlite3.Database>
export type NodeSqliteIsSqliteDatabase = IsSqliteDatabase<NodeSqliteDatabase>
export type LibsqlIsSqliteDatabase = IsSqliteDatabase<InstanceType<typeof Libsql>>
