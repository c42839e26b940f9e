import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { expect, test } from 'vitest'

// An idle hang: nothing left to wake the worker, as the fork worker of issue 42 did. The child
// it starts must be killed with it.
test('passes first', () => {
  expect(1).toBe(1)
})

test('waits for a reply that never comes', async () => {
  const child = spawn('sleep', ['300'], { stdio: 'ignore' })
  if (process.env.WATCHDOG_CHILD_PID_FILE) writeFileSync(process.env.WATCHDOG_CHILD_PID_FILE, String(child.pid))
  await new Promise(() => {})
})
