/**
 * How long a listing of the bucket (`kv.keys()`, `kv.history()`) may go without delivering an
 * entry or its end, in ms. Both are ordered consumers that end when they see the last pending
 * message; a consumer that misses it (seen here: `keys()` stalled 16 s while other nodes wrote the
 * bucket) would keep an owed-slot drain, and the lock it holds, waiting. Five seconds, the
 * JetStream client's default request timeout: a healthy listing delivers entries a round trip apart.
 */
export const LISTING_STALL_MS = 5_000

/** An async iterable of a listing, with the `stop()` that `@nats-io/kv`'s iterators have. */
type Listing<T> = AsyncIterable<T> & { stop?(): void }

/**
 * Collects `listing`, rejecting when it delivers nothing for `stallMs`: the listing is stopped
 * first, so that its consumer does not stay on the server.
 */
export async function collectListing<T>(
  listing: Listing<T>,
  what: string,
  stallMs: number = LISTING_STALL_MS,
): Promise<T[]> {
  const items: T[] = []
  const iterator = listing[Symbol.asyncIterator]()
  let stall!: (error: Error) => void
  const stalled = new Promise<never>((_, reject) => (stall = reject))
  let timer: NodeJS.Timeout | undefined
  try {
    for (;;) {
      clearTimeout(timer)
      timer = setTimeout(() => {
        listing.stop?.()
        stall(new Error(`${what} delivered nothing for ${stallMs} ms; try again`))
      }, stallMs)
      const next = await Promise.race([iterator.next(), stalled])
      if (next.done) return items
      items.push(next.value)
    }
  } finally {
    clearTimeout(timer)
  }
}
