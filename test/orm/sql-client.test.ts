import { describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../src/index.ts'
import { drizzleLockProvider } from '../../src/orm/drizzle.ts'
import { knexLockProvider } from '../../src/orm/knex.ts'
import { kyselyLockProvider } from '../../src/orm/kysely.ts'
import { mikroOrmLockProvider } from '../../src/orm/mikro-orm.ts'
import { sequelizeLockProvider } from '../../src/orm/sequelize.ts'
import { chooseDialect, dollarNumbers, ormSqlLockProvider, questionMarks } from '../../src/orm/sql-client.ts'
import { typeormLockProvider } from '../../src/orm/typeorm.ts'

describe('ORM adapters: shared parts', () => {
  it('rewrites $n placeholders as ?, the values in the order the ? appear (a $n may come twice or out of order)', () => {
    expect(questionMarks('VALUES ($1, $3 + $3, $2)', ['a', 'b', 'c'])).toEqual({
      sql: 'VALUES (?, ? + ?, ?)',
      values: ['a', 'c', 'c', 'b'],
    })
  })

  it('numbers ? placeholders as $1, $2...', () => {
    expect(dollarNumbers('SET a = ?, b = ? WHERE c = ?')).toBe('SET a = $1, b = $2 WHERE c = $3')
  })

  it('takes the given dialect over the detected one, and names the fix when it cannot tell or the database is another', () => {
    expect(chooseDialect('knex', { dialect: 'mysql' }, 'postgres')).toBe('mysql')
    expect(chooseDialect('knex', {}, 'postgres')).toBe('postgres')
    expect(() => chooseDialect('knex', {}, undefined)).toThrow(/pass \{ dialect: 'postgres' \}/)
    expect(() => chooseDialect('knex', {}, 'sqlite3')).toThrow(/sqlite3.*not support/)
    expect(() => chooseDialect('knex', { dialect: 'oracle' as never }, 'postgres')).toThrow(LockConfigurationError)
  })

  it("Prisma's MySQL error numbers (a string in meta.driverAdapterError.cause.originalCode) mean what they mean to the MySQL provider", async () => {
    // The shape Prisma 7 rejects a raw query with over @prisma/adapter-mariadb.
    const prismaError = (errno: number, kind: string): Error =>
      Object.assign(new Error('Raw query failed'), {
        code: 'P2010',
        meta: { driverAdapterError: { cause: { originalCode: String(errno), originalMessage: 'm', kind } } },
      })
    const fails = (update: Error | undefined, insert: Error | undefined) =>
      ormSqlLockProvider(
        'mysql',
        async (sql) => {
          const error = sql.startsWith('UPDATE') ? update : insert
          if (error) throw error
          return { affectedRows: 0 }
        },
        { columnType: 'datetime' },
        'countOnly',
      ).lock(lockConfiguration({ name: 'n', lockAtMostFor: '1m' }))
    // A held row: the INSERT fails on the primary key. Not acquired, no error.
    await expect(fails(undefined, prismaError(1062, 'UniqueConstraintViolation'))).resolves.toBeUndefined()
    // A deadlock or lock wait timeout on acquire: not acquired.
    await expect(fails(prismaError(1213, 'TransactionWriteConflict'), undefined)).resolves.toBeUndefined()
    await expect(fails(prismaError(1205, 'SocketTimeout'), undefined)).resolves.toBeUndefined()
    // A missing table: the provider's error with the DDL.
    const missing = await fails(prismaError(1146, 'TableDoesNotExist'), undefined).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(LockProviderError)
    expect((missing as Error).message).toContain('CREATE TABLE')
  })

  it('each adapter refuses what is not its library instance with LockConfigurationError, before anything is sent', () => {
    for (const make of [
      drizzleLockProvider,
      knexLockProvider,
      kyselyLockProvider,
      mikroOrmLockProvider,
      sequelizeLockProvider,
      typeormLockProvider,
    ]) {
      expect(() => make(undefined as never)).toThrow(LockConfigurationError)
    }
  })

  it('transaction handles that cannot escape are refused, naming the root instance to pass', () => {
    expect(() => knexLockProvider({ raw: async () => ({}), isTransaction: true })).toThrow(
      /trx.*Pass your root knex instance/s,
    )
    const trx = {
      isTransaction: true,
      withoutPlugins: () => trx,
      getExecutor: () => ({ adapter: {}, provideConnection: async () => ({}) as never }),
    }
    expect(() => kyselyLockProvider(trx)).toThrow(/Transaction.*Pass your root Kysely instance/s)
    expect(() => drizzleLockProvider({ dialect: {}, rollback: () => {} } as never)).toThrow(
      /tx.*Pass the db that drizzle\(\) returned/s,
    )
  })
})
