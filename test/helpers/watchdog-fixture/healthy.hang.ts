import { expect, test } from 'vitest'

// Slow but within the limit: the watchdog must let it pass and the run end on its own.
test('takes a second', async () => {
  await new Promise((resolve) => setTimeout(resolve, 1000))
  expect(true).toBe(true)
})
