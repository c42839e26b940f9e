/** Calls counted by a {@link countingProxy}, per method name. */
export interface CallCounter {
  /** All counted calls since the last `reset()`. */
  readonly total: number
  /** Counted calls per method name since the last `reset()`. */
  readonly byMethod: Readonly<Record<string, number>>
  reset(): void
}

/** Which methods of a client are round trips, and which return objects whose methods are. */
export interface CountSpec {
  /** Method names whose every call is one round trip to the store (`query`, `send`, `evalsha`...). */
  readonly count: readonly string[]
  /**
   * Method names that return an object to wrap as well: etcd3's `lease()` returns the lease whose
   * `grant()` is the round trip, better-sqlite3's `prepare()` the statement whose `run()` is.
   */
  readonly follow?: readonly string[]
}

/** A fresh counter. */
export function callCounter(): CallCounter & { add(method: string): void } {
  let byMethod: Record<string, number> = {}
  let total = 0
  return {
    get total() {
      return total
    },
    get byMethod() {
      return byMethod
    },
    add(method) {
      total++
      byMethod[method] = (byMethod[method] ?? 0) + 1
    },
    reset() {
      total = 0
      byMethod = {}
    },
  }
}

/**
 * Wraps a store client (the user's object, passed to a provider as it is) so that calls of the
 * methods named in `spec.count` are counted. Everything else passes through to the real client:
 * methods are called with the real client as `this` (so private fields and native bindings
 * work), and a method that returns its own object (a builder's `then`) returns the proxy again.
 * Counting costs one closure call per method access, so round trips are counted in their own
 * runs, never in timed ones.
 */
export function countingProxy<T extends object>(
  target: T,
  spec: CountSpec,
  counter: CallCounter & { add(method: string): void } = callCounter(),
): { client: T; counter: CallCounter } {
  const counted = new Set(spec.count)
  const followed = new Set(spec.follow ?? [])
  const wrap = <O extends object>(object: O): O => {
    const proxy: O = new Proxy(object, {
      get(real, property, _receiver) {
        const value: unknown = Reflect.get(real, property, real)
        if (typeof value !== 'function' || typeof property !== 'string') return value
        const method = value as (...args: unknown[]) => unknown
        if (!counted.has(property) && !followed.has(property)) return method.bind(real)
        return (...args: unknown[]): unknown => {
          if (counted.has(property)) counter.add(property)
          const result = method.apply(real, args)
          if (!followed.has(property)) return result
          if (result === real) return proxy
          return result !== null && typeof result === 'object' ? wrap(result) : result
        }
      },
    })
    return proxy
  }
  return { client: wrap(target), counter }
}
