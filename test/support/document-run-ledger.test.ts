import { describe, expect, it } from 'vitest'
import { runKey, startOfKey } from '../../src/support/document-run-ledger.ts'

// The run keys of the document ledgers: the stores read a task's runs in key order, so the key
// alone must order runs newest first, and name when each started.
describe('run keys', () => {
  it('sort newer starts first, as plain strings, across digit counts and the epoch', () => {
    const starts = [0, 1, 999, 1_000, 1_700_000_000_000, 1_700_000_000_001, 4_102_444_800_000]
    const keys = starts.map((ms) => runKey(new Date(ms)))
    expect([...keys].sort()).toEqual([...keys].reverse())
    expect(keys.every((key) => /^\d{16}-[0-9a-f-]{36}$/.test(key))).toBe(true)
  })

  it('give back when the run started, and nothing for a key that is not a run key', () => {
    const at = Date.parse('2026-12-07T22:00:00.123Z')
    expect(startOfKey(runKey(new Date(at)))).toBe(at)
    expect(startOfKey('report')).toBeUndefined()
    expect(startOfKey(`123-${'0'.repeat(36)}`)).toBeUndefined()
  })

  it('differ for two runs started in one millisecond', () => {
    const at = new Date()
    expect(runKey(at)).not.toBe(runKey(at))
    expect(runKey(at).slice(0, 16)).toBe(runKey(at).slice(0, 16))
  })
})
