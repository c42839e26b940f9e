import { describe, expect, it } from 'vitest'
import { FencingFloor, fencingFloor, parseFencingToken } from '../../src/support/fencing.ts'

// A clock stopped in one millisecond: what a record deleted and taken again within it sees.
const stopped = { now: () => 1_765_000_000_123 }

describe('FencingFloor', () => {
  it('starts at the clock in microseconds', () => {
    expect(fencingFloor(stopped)).toBe(1_765_000_000_123_000n)
    expect(new FencingFloor(stopped).at()).toBe(1_765_000_000_123_000n)
  })

  it('never repeats a fresh token within one millisecond: each is above the last it handed out', () => {
    const floor = new FencingFloor(stopped)
    const tokens = Array.from({ length: 200 }, () => floor.next(undefined))
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!, `token ${i}`).toBe(true)
    expect(tokens[0]).toBe(1_765_000_000_123_001n)
  })

  it("counts on from a record's own counter when it is above the floor", () => {
    const floor = new FencingFloor(stopped)
    expect(floor.next(1_765_000_000_124_500n)).toBe(1_765_000_000_124_501n)
    // A record deleted after that: its next fresh token is still above the one handed out.
    expect(floor.next(undefined)).toBe(1_765_000_000_124_502n)
  })

  it('keeps a floor above the tokens a store computed itself', () => {
    const floor = new FencingFloor(stopped)
    expect(floor.aboveSeen()).toBe(1n)
    expect(floor.saw(1_765_000_000_200_000n)).toBe(1_765_000_000_200_000n)
    expect(floor.saw(false)).toBe(false)
    expect(floor.saw(undefined)).toBeUndefined()
    expect(floor.saw(5n)).toBe(5n)
    expect(floor.aboveSeen()).toBe(1_765_000_000_200_001n)
    expect(floor.at()).toBe(1_765_000_000_200_000n)
    // A store's own time in microseconds, when it is the higher, wins.
    expect(floor.at(1_765_000_000_300_000n)).toBe(1_765_000_000_300_000n)
  })

  it('is one per provider: a floor on another clock is not raised by this one', () => {
    const a = new FencingFloor(stopped)
    a.next(9_000_000_000_000_000n)
    expect(new FencingFloor({ now: () => 1 }).next(undefined)).toBe(1001n)
  })
})

describe('parseFencingToken', () => {
  it('reads whole numbers from strings and safe numbers, and nothing else', () => {
    expect(parseFencingToken('123')).toBe(123n)
    expect(parseFencingToken(42)).toBe(42n)
    expect(parseFencingToken(-1)).toBeUndefined()
    expect(parseFencingToken(1.5)).toBeUndefined()
    expect(parseFencingToken('1e3')).toBeUndefined()
    expect(parseFencingToken(null)).toBeUndefined()
  })
})
