import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { LockConfigurationError } from '../../../src/index.ts'
import { zookeeperLockName, zookeeperNodeName } from '../../../src/providers/zookeeper/index.ts'

// Names and nodes made of the characters the escaping turns on, so that collisions would show.
const tricky = fc.string({
  unit: fc.constantFrom('%', '2', 'F', 'E', '5', 'u', 'D', '8', '0', '/', '.', 'a', '\u0001', '\ud800'),
  minLength: 1,
  maxLength: 8,
})
const serverNode = fc.string({
  unit: fc.constantFrom('%', '2', 'F', 'E', '5', 'u', 'D', '8', '0', '.', 'a', 'é'),
  minLength: 1,
  maxLength: 8,
})

/** zookeeperNodeName(name), or undefined when the name is refused (with LockConfigurationError, as it must be). */
function nodeOrRefused(name: string): string | undefined {
  try {
    return zookeeperNodeName(name)
  } catch (error) {
    expect(error).toBeInstanceOf(LockConfigurationError)
    return undefined
  }
}

describe('zookeeperLockName', () => {
  it('inverts the provider zookeeperNodeName for every name it accepts, lone surrogates included, so no two names share a node', () => {
    for (const names of [fc.string({ unit: 'binary', minLength: 1 }), tricky]) {
      fc.assert(
        fc.property(names, (name) => {
          const node = nodeOrRefused(name)
          if (node !== undefined) expect(zookeeperLockName(node)).toBe(name)
        }),
        { numRuns: 2_000 },
      )
    }
    expect(zookeeperLockName('reports%2Fdaily')).toBe('reports/daily')
    expect(zookeeperLockName('%2E%2E')).toBe('..')
    expect(zookeeperLockName('100%')).toBe('100%')
    expect(zookeeperLockName('100%25')).toBe('100%25')
    expect(zookeeperLockName(zookeeperNodeName('a\ud800b'))).toBe('a\ud800b')
  })

  it('every node ZooKeeper holds is the node of the name it decodes to: Java nodes read back as themselves', () => {
    fc.assert(
      fc.property(
        serverNode.filter((node) => node !== '.' && node !== '..'),
        (node) => {
          expect(zookeeperNodeName(zookeeperLockName(node))).toBe(node)
        },
      ),
      { numRuns: 2_000 },
    )
  })
})
