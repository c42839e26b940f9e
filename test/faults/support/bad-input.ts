import assert from 'node:assert/strict'
import fc from 'fast-check'
import {
  LockConfigurationError,
  LockProviderError,
  type LockProvider,
  lockConfiguration,
  type SimpleLock,
} from 'shedlock'
import { expect, it } from 'vitest'
import { recordFigure } from './figures.ts'
import type { Sut } from './fault-groups.ts'

/**
 * Pieces of hostile names: SQL, Redis, MongoDB, path and glob metacharacters, encodings that
 * stores normalise (case, Unicode normal forms, lone surrogates, NUL, trailing spaces).
 */
const META = [
  "'",
  '"',
  ';',
  '--',
  '/*',
  '*/',
  '\\',
  '%',
  '_',
  '*',
  '?',
  '[',
  ']',
  '{',
  '}',
  '$',
  '$where',
  '$gt',
  '.',
  '..',
  '/',
  ':',
  ' ',
  '\t',
  '\r\n',
  '\0',
  ' OR 1=1',
  "'; DROP TABLE shedlock; --",
  '*\r\nFLUSHALL\r\n',
  "'); db.dropDatabase(); ('",
  'é',
  'e\u0301',
  '\u{1F600}',
  '\uD800',
  '\uDFFF',
  'İ',
  'ß',
  '\u200B',
  '\uFEFF',
  'Ｖ',
]

const metaString = fc.array(fc.constantFrom(...META), { minLength: 1, maxLength: 8 }).map((parts) => parts.join(''))

/** Lock names of random Unicode (lone surrogates included), length and metacharacters. */
export const hostileName: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  metaString,
  fc.tuple(fc.string({ maxLength: 8 }), metaString).map(([plain, meta]) => plain + meta),
  fc.integer({ min: 56, max: 300 }).map((n) => 'n'.repeat(n)),
)

/** A second name that a store might confuse with `a`: what case folding, padding, truncation or encoding would make equal. */
function confusable(a: string): fc.Arbitrary<string> {
  const candidates = [
    `${a} `,
    ` ${a}`,
    a.toUpperCase(),
    a.toLowerCase(),
    a.normalize('NFD'),
    a.normalize('NFC'),
    `${a}\0`,
    `${a}\u200B`,
    `${a}\uD800`,
    `${a}\uDC00`,
    a.replace(/[\uD800-\uDFFF]/g, '\uFFFD'),
    `${a}%`,
    `${a}_`,
    `${a}*`,
    a.slice(0, 64),
    `${a.slice(0, 64)}x`,
  ].filter((b) => b !== a)
  return fc.constantFrom(...candidates)
}

const SENTINEL = 'victim'

/** Pairs of different hostile names, often names a store could confuse; never the sentinel itself. */
const namePair = hostileName
  .chain((a) => fc.tuple(fc.constant(a), fc.oneof(confusable(a), hostileName)))
  .filter(([a, b]) => a !== b && a !== SENTINEL && b !== SENTINEL)

type Attempt = { lock: SimpleLock | undefined } | { error: unknown }

async function attempt(provider: LockProvider, name: string): Promise<Attempt> {
  try {
    return { lock: await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' })) }
  } catch (error) {
    return { error }
  }
}

/** A typed error: `LockConfigurationError` (refused up front) or `LockProviderError` naming the lock. */
function expectTyped(error: unknown, name: string): 'config' | 'store' {
  if (error instanceof LockConfigurationError) return 'config'
  assert.ok(
    error instanceof LockProviderError,
    `lock(${JSON.stringify(name)}) failed with an untyped error: ${String(error)}`,
  )
  expect(error.lockName, 'the LockProviderError names the lock').toBe(name)
  return 'store'
}

/**
 * 7. Bad lock names, property-based: pairs of hostile names against the store. Each name either
 * works (the store then holds exactly that name, and the other name of the pair gets a lock of
 * its own without changing the first one's record) or fails with a typed error. A lock held by
 * another node throughout (`victim`) is never touched, and afterwards the store holds records
 * only for names that were asked for: no injection, no other lock touched.
 */
export function badLockNames(sut: Sut, runs = 60): void {
  it(`bad input: ${runs} pairs of hostile lock names each work or fail typed; no other lock touched, nothing injected`, async () => {
    const s = sut()
    const provider = await s.node()
    const victim = await (await s.node()).lock(lockConfiguration({ name: SENTINEL, lockAtMostFor: '10m' }))
    assert.ok(victim)
    const snapshot = await s.record(SENTINEL)
    assert.ok(snapshot)
    const asked = new Set<string>([SENTINEL])
    // Other groups share the namespace: only records that appear during this test count.
    const before = new Set((await s.keys()) ?? [])
    const outcomes = { locked: 0, config: 0, store: 0 }

    await fc.assert(
      fc.asyncProperty(namePair, async ([a, b]) => {
        asked.add(a)
        asked.add(b)
        const first = await attempt(provider, a)
        const held: SimpleLock[] = []
        try {
          if ('error' in first) {
            outcomes[expectTyped(first.error, a)]++
            return
          }
          assert.ok(
            first.lock,
            `lock(${JSON.stringify(a)}) answered "held" though no node holds that name: it shares a record with another name (${SENTINEL}?)`,
          )
          held.push(first.lock)
          outcomes.locked++
          expect(await s.isHeld(a), `the store shows no lock for ${JSON.stringify(a)} after lock() succeeded`).toBe(
            true,
          )
          const recordA = await s.record(a)
          const second = await attempt(provider, b)
          if ('error' in second) {
            outcomes[expectTyped(second.error, b)]++
          } else {
            assert.ok(
              second.lock,
              `lock(${JSON.stringify(b)}) answered "held" while only ${JSON.stringify(a)} is held: the two names share one lock`,
            )
            held.push(second.lock)
            outcomes.locked++
            expect(await s.record(a), `locking ${JSON.stringify(b)} changed the record of ${JSON.stringify(a)}`).toBe(
              recordA,
            )
          }
        } finally {
          for (const lock of held) await lock.unlock()
          expect(await s.record(SENTINEL), `the other node's lock "${SENTINEL}" was touched`).toBe(snapshot)
        }
      }),
      { numRuns: runs, endOnFailure: true },
    )

    const keys = await s.keys()
    if (keys) {
      const expected = new Set<string>()
      for (const name of asked) {
        try {
          expected.add(s.keyOf(name))
        } catch {
          // A name the store's key encoding refuses (it was refused by lock() too).
        }
      }
      const stray = keys.filter((key) => !before.has(key) && !expected.has(key))
      expect(stray, 'records for names nobody asked for').toEqual([])
    }
    expect(await s.record(SENTINEL)).toBe(snapshot)
    await victim.unlock()
    const tried = outcomes.locked + outcomes.config + outcomes.store
    recordFigure({
      store: s.label,
      group: 'bad-input',
      faults: 0,
      inputs: tried,
      note: `${tried} hostile names tried: ${outcomes.locked} locked, ${outcomes.config} refused as LockConfigurationError, ${outcomes.store} as LockProviderError; "${SENTINEL}" untouched${keys ? ', no stray records' : ''}`,
    })
  }, 180_000)
}

/** Every call on the client fails the test: it must not be reached. */
export function tripwire(calls: string[]): never {
  const handler: ProxyHandler<object> = {
    get(_, property) {
      if (property === 'then' || typeof property === 'symbol') return undefined
      return new Proxy(() => {}, {
        apply() {
          calls.push(String(property))
          throw new Error(`the client's ${String(property)}() was called`)
        },
        get: handler.get,
      })
    },
  }
  return new Proxy({}, handler) as never
}

/** A provider option that names storage (a table, a column, a key prefix, a path). */
export interface HostileOption {
  /** e.g. `tableName`. */
  option: string
  /** Builds the provider with `value` for the option, over `client`. */
  build(value: string, client: never): unknown
  /** Holds for every value the provider may accept: nothing in it can reach outside its place. */
  safe(value: string): boolean
}

const hostileOptionValue = fc.oneof(
  metaString,
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.tuple(fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,10}$/), metaString).map(([plain, meta]) => plain + meta),
  fc.constantFrom(
    'shedlock; DROP TABLE users',
    'a.b.c',
    '"quoted"',
    '',
    'x'.repeat(64),
    'ops.shedlock',
    'a:b',
    '/zookeeper/x',
    '/a/../b',
    '/a//b',
    '/a/',
    'job-lock',
    'arn:aws:dynamodb:us-east-1:1:table/x',
  ),
)

/**
 * 7b. Table, column, key-prefix and path options with hostile values, property-based: each is
 * rejected with `LockConfigurationError` when the provider is built, before the client is ever
 * called (a client that fails the test if called), and every accepted value is safe.
 */
export function hostileOptions(store: string, options: HostileOption[], runs = 300): void {
  it(`bad input: hostile ${options.map((o) => o.option).join(', ')} values are rejected before any call to the store`, () => {
    let rejected = 0
    let accepted = 0
    for (const o of options) {
      fc.assert(
        fc.property(hostileOptionValue, (value) => {
          const calls: string[] = []
          let error: unknown
          try {
            o.build(value, tripwire(calls))
          } catch (e) {
            error = e
          }
          expect(calls, `${o.option} ${JSON.stringify(value)}: the client was called`).toEqual([])
          if (error === undefined) {
            accepted++
            expect(o.safe(value), `${o.option} ${JSON.stringify(value)} was accepted`).toBe(true)
          } else {
            rejected++
            assert.ok(error instanceof LockConfigurationError, `${o.option} ${JSON.stringify(value)}: ${String(error)}`)
            expect(error.message).toContain(o.option.split('.')[0])
          }
        }),
        { numRuns: runs },
      )
    }
    recordFigure({
      store,
      group: 'bad-input',
      faults: 0,
      inputs: rejected + accepted,
      note: `${rejected + accepted} hostile option values: ${rejected} rejected before any call, ${accepted} accepted (all safe)`,
    })
  })
}
