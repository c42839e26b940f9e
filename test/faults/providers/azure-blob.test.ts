import { azureBlobLockProvider } from 'shedlock/azure-blob'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'

// Only the bad-input group so far: the kill, restart and network groups need azurite under the
// fault suite's own control (it runs in memory: a restart forgets every blob).

// The characters the provider refuses in a prefix: control characters and lone surrogates.
const UNSAFE_PREFIX = /[\u0000-\u001f\u007f]|\p{Cs}/u

describe('azure-blob options', () => {
  hostileOptions('azure-blob', [
    {
      option: 'prefix',
      // The tripwire client stands for the ContainerClient; only its container name is a value.
      build: (prefix, client) => azureBlobLockProvider({ containerClient: Object.assign(Object.create(client as object) as object, { containerName: 'locks' }) as never, prefix }),
      safe: (v) => !UNSAFE_PREFIX.test(v) && v.length < 1023,
    },
  ])
})
