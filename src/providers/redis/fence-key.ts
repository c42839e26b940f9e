// The counter key beside each lock key that the provider's `fencingTokens` INCRs when it takes
// the lock: in the lock key's Redis Cluster slot, so that one script may write both, and never a
// lock key of any key space.

/**
 * The key of the fencing counter of `lockKey`, as the provider passes it to the client (which
 * prepends its own `keyPrefix`, `clientPrefix`, to both keys):
 * - usually `:{<clientPrefix><lockKey>}:fence`: its hash tag is the whole lock key as Redis sees
 *   it, so both hash to one slot;
 * - when that cannot work (the client prefix or the lock key holds `{` or `}`, so that Redis
 *   hashes a part of one of them), `:{<n>}:fence:<lockKey>` with the smallest `n` that puts it in
 *   the lock key's slot.
 * The leading `:` makes its first `:`-separated part empty, which no lock key's is (neither
 * `keyPrefix` nor `environment` may be empty or contain `:`), so no lock key, of any key space,
 * is ever a counter key, and no SCAN for locks lists one.
 */
export function redisFenceKey(lockKey: string, clientPrefix: string = ''): string {
  const full = clientPrefix + lockKey
  if (!/[{}]/.test(full)) return `:{${full}}:fence`
  const slot = keySlot(full)
  // Decimal tags from 0 reach every one of the 16,384 slots before 200,000 (fence-key.test.ts).
  for (let n = 0; n < 1_000_000; n++) {
    const key = `:{${n}}:fence:${lockKey}`
    if (keySlot(clientPrefix + key) === slot) return key
  }
  throw new Error(`redis: found no fencing counter key in the slot of ${JSON.stringify(full)}`)
}

/** The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key without one, mod 16384. */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8')
  let start = 0
  let end = bytes.length
  // Redis: the part between the first `{` and the first `}` after it, when that part is not empty.
  const open = bytes.indexOf(0x7b)
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1)
    if (close > open + 1) {
      start = open + 1
      end = close
    }
  }
  let crc = 0
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ bytes[i]!) & 0xff]!
  return crc & 16383
}

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis Cluster uses.
const CRC16_TABLE: Uint16Array = (() => {
  const table = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let crc = i << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
    table[i] = crc
  }
  return table
})()
