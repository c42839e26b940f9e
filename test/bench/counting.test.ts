import { describe, expect, it } from 'vitest'
import { countingProxy } from '../../bench/counting.ts'
import { lockConfiguration } from '../../src/core/lock-configuration.ts'
import { type PostgresClient, postgresLockProvider } from '../../src/providers/postgres/index.ts'
import { sqliteLockProvider, type SqliteDatabase } from '../../src/providers/sqlite/index.ts'

/** A client with a private field, as pg's Pool and ioredis have: methods must run with the real object as `this`. */
class FakeClient {
  #log: string[] = []
  readonly name = 'fake'
  async query(text: string): Promise<{ rowCount: number }> {
    this.#log.push(text)
    return { rowCount: 1 }
  }
  connect(): string {
    return this.#log.length.toString()
  }
  get log(): readonly string[] {
    return this.#log
  }
}

describe('countingProxy', () => {
  it('counts only the named methods and passes everything through to the real client', async () => {
    const real = new FakeClient()
    const { client, counter } = countingProxy(real, { count: ['query'] })
    await client.query('SELECT 1')
    await client.query('SELECT 2')
    expect(client.connect()).toBe('2')
    expect(client.name).toBe('fake')
    expect(real.log).toEqual(['SELECT 1', 'SELECT 2'])
    expect(counter.total).toBe(2)
    expect(counter.byMethod).toEqual({ query: 2 })
    counter.reset()
    expect(counter.total).toBe(0)
    expect(counter.byMethod).toEqual({})
  })

  it('follows returned objects and builder chains that return themselves', async () => {
    let commits = 0
    const builder = {
      steps: [] as string[],
      // biome-ignore lint/suspicious/noThenProperty: a builder chain whose `then` returns the builder, as query builders' do.
      then(step: string) {
        this.steps.push(step)
        return this
      },
      async commit() {
        commits++
        return { succeeded: true, steps: this.steps }
      },
    }
    const lease = { grant: async () => '7', revoke: async () => {} }
    const real = { if: () => builder, lease: () => lease }
    const { client, counter } = countingProxy(real, {
      count: ['grant', 'revoke', 'commit'],
      follow: ['lease', 'if', 'then'],
    })
    expect(await client.lease().grant()).toBe('7')
    const reply = await client.if().then('a').then('b').commit()
    expect(reply).toEqual({ succeeded: true, steps: ['a', 'b'] })
    expect(commits).toBe(1)
    expect(counter.byMethod).toEqual({ grant: 1, commit: 1 })
  })

  it('counts one query per acquire and per release of the postgres provider (after its one-time read of the name length), and one statement run through prepare()', async () => {
    const statements: string[] = []
    const pool: PostgresClient = {
      async query(text) {
        statements.push(text)
        return { rowCount: 1, rows: [{ max_length: 64, type: 'character varying(64)' }] }
      },
    }
    const { client, counter } = countingProxy(pool, { count: ['query'] })
    const provider = postgresLockProvider({ client })
    // The first acquire of a provider reads the name column's length first.
    await (await provider.lock(lockConfiguration({ name: 'first', lockAtMostFor: 60_000 })))!.unlock()
    expect(statements.splice(0)).toEqual([
      expect.stringMatching(/pg_attribute/),
      expect.stringMatching(/^INSERT INTO shedlock/),
      expect.stringMatching(/^UPDATE shedlock/),
    ])
    counter.reset()
    const lock = await provider.lock(lockConfiguration({ name: 'counted', lockAtMostFor: 60_000 }))
    expect(counter.total).toBe(1)
    await lock!.unlock()
    expect(counter.total).toBe(2)
    expect(statements[0]).toMatch(/^INSERT INTO shedlock/)
    expect(statements[1]).toMatch(/^UPDATE shedlock/)

    const database: SqliteDatabase = { prepare: () => ({ run: () => ({ changes: 1 }) }) }
    const sqlite = countingProxy(database, { count: ['run'], follow: ['prepare'] })
    const held = await sqliteLockProvider({ database: sqlite.client }).lock(
      lockConfiguration({ name: 'counted', lockAtMostFor: 60_000 }),
    )
    await held!.unlock()
    expect(sqlite.counter.byMethod).toEqual({ run: 2 })
  })
})
