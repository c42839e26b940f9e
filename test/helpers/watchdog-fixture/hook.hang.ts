import { beforeAll, test } from 'vitest'

// A beforeAll that never ends, as a store that does not answer would hold one.
beforeAll(async () => {
  await new Promise(() => {})
})

test('never reached', () => {})
