import { azureBlobLockProvider } from 'shedlock/azure-blob'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'
import { azuriteService } from '../../helpers/object-stores.ts'
import { holderKilled, storeRestart } from '../support/fault-groups.ts'
import { secrets } from '../support/secrets.ts'
import { freePort, SECRET_PASSWORD } from '../support/servers.ts'
import { startOrSkip } from '../support/start.ts'
import { azureBlobUnderTest } from '../support/stores.ts'

// azurite of the suite's own. It may forget the container in a crash (it saves its metadata
// every few seconds), which Azure would not: the restart recreates the container, as the operator
// of a fresh emulator would, and the group records whether the held lock survived. Not here, for
// the CI budget: the network cuts, clock skew, a task outliving its lock and the soak. Nor, yet,
// the hostile lock names: they found that a blob named with a character XML cannot carry breaks
// every listing of its container, and that the SDK resolves "x/../y" to the blob "y" (the
// provider refuses both now), but azurite still lists a few Unicode names in another form than
// sent (an "İ" as "I" and a combining dot), which the group's check for stray records cannot
// tell from a name that reached the wrong blob. To be looked into.
const azure = await startOrSkip('azure-blob', () => azureBlobUnderTest())

describe.skipIf(!azure)('azure-blob (azurite)', () => {
  const sut = () => azure!
  holderKilled(sut)
  storeRestart(sut, (s) => ({
    what: 'azurite crash (SIGKILL) and restart',
    down: () => s.server!.stop(true),
    up: async () => {
      await s.server!.start()
      await azuriteService(`http://127.0.0.1:${s.server!.port}/devstoreaccount1`)
        .getContainerClient(s.spec().bucket!)
        .createIfNotExists()
    },
  }))
  // The account key is the password here (any base64 text is a well-formed key).
  secrets('azure-blob', SECRET_PASSWORD, async () => ({
    cases: [
      { what: 'wrong account key (403)', spec: azure!.spec({ password: SECRET_PASSWORD }) },
      { what: 'account key, closed port', spec: azure!.spec({ password: SECRET_PASSWORD, port: await freePort() }) },
    ],
  }))
})

// The characters the provider refuses in a prefix: control characters and lone surrogates.
const UNSAFE_PREFIX = /[\u0000-\u001f\u007f]|\p{Cs}/u

describe('azure-blob options', () => {
  hostileOptions('azure-blob', [
    {
      option: 'prefix',
      // The tripwire client stands for the ContainerClient; only its container name is a value.
      build: (prefix, client) =>
        azureBlobLockProvider({
          containerClient: Object.assign(Object.create(client as object) as object, {
            containerName: 'locks',
          }) as never,
          prefix,
        }),
      safe: (v) => !UNSAFE_PREFIX.test(v) && v.length < 1023,
    },
  ])
})
