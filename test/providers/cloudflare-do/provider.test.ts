import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { LockConfigurationError, LockProviderError, lockConfiguration } from '../../../src/index.ts'
import {
  durableObjectLockInspector,
  durableObjectLockProvider,
  type DurableObjectLockNamespace,
} from '../../../src/providers/cloudflare-do/index.ts'
import { lockInspectorSuite, lockProviderSuite } from '../../../src/testing/index.ts'
import { connectOrSkip } from '../../helpers/backends.ts'
import { loadMiniflare, type MiniflareInstance } from '../../helpers/miniflare.ts'
import { registerInspectorSuite, registerSuite } from '../../helpers/register-suite.ts'

// ShedLockDurableObject from the built package, in workerd (Miniflare), bound as LOCKS; the
// provider runs in Node. Its namespace is a plain object whose stubs reach the object through the
// Worker's fetch handler (`?object=<name>`), not Miniflare's proxy of the binding: that proxy frees
// workerd-side objects as Node collects garbage, and once (CI, under load) lost the binding itself
// mid-run, so that every later call failed its heap assertion ("false == true").

const root = fileURLToPath(new URL('../../../', import.meta.url))
const ENTRY = `export { ShedLockDurableObject } from './dist/providers/cloudflare-do/index.js'
export default {
  fetch(request, env) {
    const name = new URL(request.url).searchParams.get('object')
    return env.LOCKS.get(env.LOCKS.idFromName(name)).fetch(request)
  },
}
`

/** The LOCKS binding as the provider calls it, over `mf.dispatchFetch()`. */
function namespaceOf(mf: MiniflareInstance): DurableObjectLockNamespace {
  return {
    idFromName: (name) => name,
    get: (id) => ({
      fetch: async (_input, init) => {
        const response = await mf.dispatchFetch(
          `http://objects.invalid/?object=${encodeURIComponent(String(id))}`,
          init,
        )
        const { status } = response
        return { ok: status >= 200 && status < 300, status, json: () => response.json(), text: () => response.text() }
      },
    }),
  }
}

function modules(): { type: 'ESModule'; path: string; contents: string }[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? e.name === 'cli'
          ? []
          : walk(join(dir, e.name))
        : e.name.endsWith('.js')
          ? [join(dir, e.name)]
          : [],
    )
  return [
    { type: 'ESModule', path: join(root, 'entry.mjs'), contents: ENTRY },
    ...walk(join(root, 'dist')).map((path) => ({
      type: 'ESModule' as const,
      path,
      contents: readFileSync(path, 'utf8'),
    })),
  ]
}

const instances: MiniflareInstance[] = []
afterAll(async () => {
  await Promise.all(instances.map((mf) => mf.dispose()))
})

const started = await connectOrSkip('miniflare', 'the miniflare package', async () => {
  const { Miniflare } = await loadMiniflare()
  const start = async (): Promise<{ mf: MiniflareInstance; namespace: DurableObjectLockNamespace }> => {
    const mf = new Miniflare({
      modules: modules(),
      modulesRoot: root,
      compatibilityDate: '2026-04-01',
      compatibilityFlags: ['nodejs_compat'],
      durableObjects: { LOCKS: { className: 'ShedLockDurableObject', useSQLite: true } },
    })
    instances.push(mf)
    await mf.ready
    return { mf, namespace: namespaceOf(mf) }
  }
  return { start, ...(await start()) }
})

const namespace = started?.namespace as DurableObjectLockNamespace
const objectName = `suite-${process.pid}`

describe.skipIf(!started)('durableObjectLockProvider (ShedLockDurableObject in Miniflare)', () => {
  const inspector = started ? durableObjectLockInspector({ namespace, objectName }) : (undefined as never)
  registerSuite(
    lockProviderSuite({
      provider: () => durableObjectLockProvider({ namespace, objectName }),
      isLocked: async (name) => (await inspector.get(name))?.held === true,
      unreachableProvider: async () => {
        const gone = await started!.start()
        const provider = durableObjectLockProvider({ namespace: gone.namespace, objectName })
        await gone.mf.dispose()
        instances.splice(instances.indexOf(gone.mf), 1)
        return provider
      },
      extensible: true,
      fencing: true,
      slots: { inspector: true },
      fuzzIterations: 5,
      // As Firestore's emulator: a call through Miniflare takes milliseconds idle but hundreds on a
      // loaded CI machine, and the suite's shortest locks (200 ms) expired before they were read
      // back held (CI, 'basic: a lock expires after lockAtMostFor', passed on its retry).
      timeGranularityMs: 500,
    }),
  )

  describe('inspector', () => {
    registerInspectorSuite(
      lockInspectorSuite({
        provider: () => durableObjectLockProvider({ namespace, objectName: 'inspected' }),
        inspector: durableObjectLockInspector({ namespace, objectName: 'inspected' }),
      }),
    )
  })

  it("fencing tokens outlive the lock's entry: after removeExpired() deleted it, the next token is still greater", async () => {
    const name = `do-fence-${Date.now()}`
    const provider = durableObjectLockProvider({ namespace, objectName: 'fenced' })
    const first = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    assert.ok(first?.fencingToken !== undefined)
    await first.unlock()
    expect(await durableObjectLockInspector({ namespace, objectName: 'fenced' }).removeExpired()).toBeGreaterThan(0)
    expect(await durableObjectLockInspector({ namespace, objectName: 'fenced' }).get(name)).toBeUndefined()
    const next = await provider.lock(lockConfiguration({ name, lockAtMostFor: '1m' }))
    expect(next!.fencingToken! > first.fencingToken).toBe(true)
    await next!.unlock()
  })

  it('a 3,000-character name works on a SQLite-backed object', async () => {
    const name = `do-long-${Date.now()}-${'x'.repeat(3000)}`
    const lock = await durableObjectLockProvider({ namespace, objectName }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    expect(lock).toBeDefined()
    expect(
      await durableObjectLockProvider({ namespace, objectName }).lock(lockConfiguration({ name, lockAtMostFor: '1m' })),
    ).toBeUndefined()
    await lock!.unlock()
  })

  it('objects are separate lock spaces', async () => {
    const name = `do-spaces-${Date.now()}`
    const a = await durableObjectLockProvider({ namespace, objectName: 'space-a' }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    const b = await durableObjectLockProvider({ namespace, objectName: 'space-b' }).lock(
      lockConfiguration({ name, lockAtMostFor: '1m' }),
    )
    expect(a && b).toBeTruthy()
    await a!.unlock()
    await b!.unlock()
  })

  it('rejects what is not a namespace binding, and an empty objectName or lockedBy, with LockConfigurationError', () => {
    expect(() => durableObjectLockProvider({ namespace: {} as never })).toThrow(
      /pass the binding of ShedLockDurableObject as \{ namespace \}/,
    )
    expect(() => durableObjectLockInspector({ namespace: undefined as never })).toThrow(LockConfigurationError)
    expect(() => durableObjectLockProvider({ namespace, objectName: '' })).toThrow(
      /objectName must be a non-empty string/,
    )
    expect(() => durableObjectLockProvider({ namespace, lockedBy: '' })).toThrow(/lockedBy must be a non-empty string/)
  })

  it('an object that is not ShedLockDurableObject rejects with LockProviderError naming the lock', async () => {
    const wrong: DurableObjectLockNamespace = {
      idFromName: () => 'x',
      get: () => ({ fetch: async () => new Response('no', { status: 404 }) }),
    }
    await expect(
      durableObjectLockProvider({ namespace: wrong }).lock(
        lockConfiguration({ name: 'do-wrong', lockAtMostFor: '1m' }),
      ),
    ).rejects.toThrow(/cloudflare-do: could not acquire lock "do-wrong": the object answered HTTP 404/)
    await expect(
      durableObjectLockProvider({ namespace: wrong }).lock(
        lockConfiguration({ name: 'do-wrong', lockAtMostFor: '1m' }),
      ),
    ).rejects.toBeInstanceOf(LockProviderError)
  })
})
