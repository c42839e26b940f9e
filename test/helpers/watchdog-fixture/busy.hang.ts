import { test } from 'vitest'

// A hang that blocks the worker's event loop: no timer of the worker can fire any more.
test('spins without end', () => {
  for (;;) {}
})
