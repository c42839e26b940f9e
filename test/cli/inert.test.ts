import { describe, expect, it } from 'vitest'
import { inert, inertOutput } from '../../src/cli/inert.ts'
import { formatTable } from '../../src/cli/lock-table.ts'

// Every character a terminal may act on: C0, DEL, C1, line separators, bidirectional controls.
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/

describe('inert', () => {
  it('writes control characters as visible escapes, line breaks and tabs included', () => {
    expect(inert('a\x1b]0;owned\x07b\x1b[2J\r\n\tc\u009b31m\u202eevil\u0000')).toBe(
      'a\\u001b]0;owned\\u0007b\\u001b[2J\\r\\n\\tc\\u009b31m\\u202eevil\\u0000',
    )
    expect(inert('plain näme, 日本, back\\slash')).toBe('plain näme, 日本, back\\slash')
  })

  it('inertOutput keeps the layout (line feeds and tabs), and a JSON document parses to the same value', () => {
    const value = { node: 'n\u009b2J\u202e\u2028' }
    const json = `${JSON.stringify(value, null, 2)}\n`
    const out = inertOutput(`${json}\tx\r\x1bc`)
    expect(out.replaceAll('\n', '').replaceAll('\t', '')).not.toMatch(CONTROLS)
    expect(JSON.parse(out.slice(0, out.indexOf('\n}') + 2))).toEqual(value)
    expect(out.endsWith('\n\tx\\r\\u001bc')).toBe(true)
  })

  it('formatTable makes every cell inert, and aligns on what is printed', () => {
    const table = formatTable(
      ['A', 'B'],
      [
        ['x\ny', 'z'],
        ['long one', '\x1b[2J'],
      ],
    )
    expect(table.replaceAll('\n', '')).not.toMatch(CONTROLS)
    expect(table.split('\n')).toEqual(['A         B', 'x\\ny      z', 'long one  \\u001b[2J'])
  })
})
