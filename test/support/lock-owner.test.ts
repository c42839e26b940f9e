import { describe, expect, it } from 'vitest'
import { lockOwner } from '../../src/support/lock-owner.ts'

describe('lockOwner', () => {
  it('counts up by one per owner, across the boundaries of its cached parts, and keeps the prefix given', () => {
    const owners = Array.from({ length: 1000 }, (_, i) => lockOwner(i < 500 ? 'host-a' : 'host-b'))
    const pattern = new RegExp(`^host-[ab]:${process.pid}:([0-9a-f]{12})$`)
    const counts = owners.map((owner) => {
      const match = pattern.exec(owner)
      expect(match, owner).not.toBeNull()
      return BigInt(`0x${match![1]}`)
    })
    // 1000 owners cross at least three of the boundaries where the last two hex digits wrap.
    for (let i = 1; i < counts.length; i++)
      expect(counts[i]! - counts[i - 1]!, owners[i]).toBe(counts[i - 1] === 0xffffffffffffn ? -0xffffffffffffn : 1n)
    expect(owners.slice(0, 500).every((owner) => owner.startsWith('host-a:'))).toBe(true)
    expect(owners.slice(500).every((owner) => owner.startsWith('host-b:'))).toBe(true)
    expect(new Set(owners).size).toBe(1000)
  })

  it('cuts a long prefix to 200 characters, so that the owner fits a 255-character column', () => {
    expect(lockOwner('h'.repeat(300))).toMatch(new RegExp(`^h{200}:${process.pid}:[0-9a-f]{12}$`))
  })
})
