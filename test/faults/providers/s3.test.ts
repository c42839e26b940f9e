import { s3LockProvider } from 'shedlock/s3'
import { describe } from 'vitest'
import { hostileOptions } from '../support/bad-input.ts'

// Only the bad-input group so far: the kill, restart and network groups need Ceph RGW under the
// fault suite's own control (scripts/ceph-rgw.sh starts one shared server; its memstore OSD
// forgets every object on a restart).

const BUCKET = /^[A-Za-z0-9._-]{3,255}$/
// The characters the provider refuses in a prefix: control characters and lone surrogates.
const UNSAFE_PREFIX = /[\u0000-\u001f\u007f]|\p{Cs}/u

describe('s3 options', () => {
  hostileOptions('s3', [
    { option: 'bucket', build: (bucket, client) => s3LockProvider({ client, bucket }), safe: (v) => BUCKET.test(v) },
    // A key prefix is a plain string in a key, never a path: any well-formed one is safe.
    { option: 'prefix', build: (prefix, client) => s3LockProvider({ client, bucket: 'locks', prefix }), safe: (v) => !UNSAFE_PREFIX.test(v) && Buffer.byteLength(v) < 1023 },
  ])
})
