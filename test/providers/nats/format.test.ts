import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError } from '../../../src/index.ts'
import { natsLockKey, natsLockName } from '../../../src/providers/nats/index.ts'

// Names and keys made of the characters the encoding turns on, so that collisions would show.
const tricky = fc.string({
  unit: fc.constantFrom('=', '3', 'A', 'D', '2', 'E', ':', '.', 'a', 'é', ' ', '/'),
  minLength: 1,
  maxLength: 8,
})
const serverKey = fc.string({
  unit: fc.constantFrom('=', '3', 'A', 'D', '2', 'E', '.', 'a', '-', '_', '/'),
  minLength: 1,
  maxLength: 8,
})
const holdable = (key: string): boolean => !key.startsWith('.') && !key.endsWith('.') && !key.includes('..')

/** natsLockKey(name), or undefined when the name is refused (with LockConfigurationError, as it must be). */
function keyOrRefused(name: string): string | undefined {
  try {
    return natsLockKey(name)
  } catch (error) {
    expect(error).toBeInstanceOf(LockConfigurationError)
    return undefined
  }
}

describe('natsLockName', () => {
  it('inverts the provider natsLockKey for every name it accepts, so no two names share a key', () => {
    for (const names of [fc.string({ unit: 'grapheme', minLength: 1 }), tricky]) {
      fc.assert(
        fc.property(names, (name) => {
          const key = keyOrRefused(name)
          if (key !== undefined) expect(natsLockName(key)).toBe(name)
        }),
        { numRuns: 2_000 },
      )
    }
    expect(natsLockName('=report=3Adaily')).toBe('report:daily')
    expect(natsLockName('=daily')).toBe('=daily')
    expect(natsLockName('==3A')).toBe(':')
    expect(natsLockName('=')).toBe('=')
  })

  it('every key the server holds is the key of the name it decodes to: Java keys read back as themselves', () => {
    fc.assert(
      fc.property(serverKey.filter(holdable), (key) => {
        expect(natsLockKey(natsLockName(key))).toBe(key)
      }),
      { numRuns: 2_000 },
    )
  })
})
