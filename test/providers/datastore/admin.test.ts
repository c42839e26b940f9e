import { describe, expect, it } from 'vitest'
import { lockConfiguration } from '../../../src/index.ts'
import { datastoreLockProvider } from '../../../src/providers/datastore/index.ts'
import { cli, type ListJson, lines } from '../../cli/support/cli.ts'
import { cliBasics } from '../../cli/support/proof.ts'
import { GOOGLE_TEST_PROJECT } from '../../helpers/google-emulators.ts'
import { emulatorOrSkip } from './emulator.ts'

const emulator = await emulatorOrSkip()

describe.skipIf(!emulator)('shedlock CLI on Datastore (the emulator; the built bin)', () => {
  const { datastore, namespace } = emulator!
  // The CLI finds the emulator as the client does: through DATASTORE_EMULATOR_HOST, which the helper set.
  const url = `datastore://${GOOGLE_TEST_PROJECT}/${namespace}`

  cliBasics({
    kind: /^Datastore /,
    args: ['--url', url],
    provider: () => datastoreLockProvider({ datastore }),
    isHeld: async (name) => {
      const [entity] = await datastore.get(datastore.key({ namespace, path: ['lock', name] }))
      return entity?.lock_until instanceof Date && entity.lock_until.getTime() > Date.now()
    },
    init: {
      args: ['--url', `${url}-init`],
      first: /nothing to create: Datastore creates kind lock with its first lock/,
      again: /nothing to create/,
    },
  })

  it('`shedlock list --url datastore://test-project` lists the default namespace, Java’s kind `lock`', async () => {
    const name = `cli-default-${process.pid}-${Date.now()}`
    // The client's namespace is the test's: '' names the default one.
    const lock = await datastoreLockProvider({ datastore, namespace: '' }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    try {
      const run = await cli(['list', '--json', '--url', `datastore://${GOOGLE_TEST_PROJECT}`])
      expect(run.code, run.stderr).toBe(0)
      const listed = JSON.parse(run.stdout) as ListJson
      expect(listed.locks.find((l) => l.name === name)).toMatchObject({ state: 'held', lockedBy: lock?.lockedBy })
    } finally {
      await lock?.unlock()
    }
  })

  it('a URL with credentials, a port or two path parts is refused in one line, before connecting', async () => {
    for (const bad of [
      'datastore://user:secret@p',
      'datastore://p:8687',
      'datastore://p/a/b',
      'datastore://p?kind=x',
    ]) {
      const run = await cli(['list', '--url', bad])
      expect(run.code, bad).toBe(2)
      expect(lines(run.stderr), bad).toHaveLength(1)
      expect(run.stderr).not.toContain('secret')
    }
  })

  it('an emulator that does not answer fails in one line naming the project and DATASTORE_EMULATOR_HOST', async () => {
    const run = await cli(['list', '--url', `datastore://${GOOGLE_TEST_PROJECT}`], {
      env: { DATASTORE_EMULATOR_HOST: '127.0.0.1:1' },
    })
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/cannot reach Datastore project test-project \(emulator at 127\.0\.0\.1:1\)/)
  })
})
