import { writeFileSync } from 'node:fs'
import type { Suite, Test } from '@vitest/runner'
import { afterEach, beforeEach } from 'vitest'

// The worker's half of the watchdog (test/helpers/watchdog.ts), a setup file of every test file:
// the test this worker is in, written synchronously before the test starts. The workers'
// reports to vitest's main process are batched on a timer, so a test that blocks its worker's
// event loop at once is never reported as started; this file still names it.
const dir = process.env.SHEDLOCK_WATCHDOG_DIR
if (dir) {
  const path = `${dir}/${process.pid}`
  beforeEach(({ task }) => {
    // The test's name within its suites, as the reporter's fullName: the file itself is left out.
    const names: string[] = []
    for (let t: Suite | Test | undefined = task; t && t !== task.file; t = t.suite) names.unshift(t.name)
    writeFileSync(path, JSON.stringify({ file: task.file.filepath, test: names.join(' > '), since: Date.now() }))
  })
  afterEach(({ task }) => {
    writeFileSync(path, JSON.stringify({ file: task.file.filepath }))
  })
}
