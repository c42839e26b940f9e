import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

// The integrations describe the schedulers with structural types: importing one at run time
// would make it a dependency of shedlock (or fail for users who do not have it).
const dir = new URL('../../src/integrations/', import.meta.url)
const files = readdirSync(dir).filter((file) => file.endsWith('.ts'))

describe.each(files)('src/integrations/%s', (file) => {
  it('imports only node: built-ins and relative modules at run time', () => {
    const source = readFileSync(new URL(file, dir), 'utf8')
    const runtime = [...source.matchAll(/^\s*import\s+(?!type\b)(?:[^'"]*?\s+from\s+)?['"]([^'"]+)['"]/gm)].map(
      (m) => m[1]!,
    )
    expect(runtime.filter((specifier) => !specifier.startsWith('.') && !specifier.startsWith('node:'))).toEqual([])
  })
})
