import {
  prefixText,
  promised,
  type RedisCommand,
  type RedisCommands,
  requireMethods,
  type SetReply,
  withSetReply,
} from './commands.ts'

/** `keys` and `arguments` of a node-redis `eval`/`evalSha` call. */
export interface NodeRedisEvalOptions {
  keys: string[]
  arguments: string[]
}

/**
 * The part of a node-redis (the `redis` package, 5 or 6) client, from `createClient()` or
 * `createCluster()`, that {@link fromNodeRedis} calls. We don't import redis: any object with
 * these methods works. Legacy-mode clients (`legacyMode: true`, `client.legacy()`) are callback
 * based and do not fit; pass the regular client.
 */
export interface NodeRedisClient {
  // `{ PX, NX: true }` is understood by node-redis 4, 5 and 6 (5 and 6 also accept `{ expiration, condition }`).
  set(key: string, value: string, options: { PX: number; NX: true }): Promise<unknown>
  evalSha(sha1: string, options: NodeRedisEvalOptions): Promise<unknown>
  eval(script: string, options: NodeRedisEvalOptions): Promise<unknown>
}

/**
 * Adapts a node-redis (`redis` 5 or 6) client from `createClient()` or `createCluster()`. The
 * client must be connected (`await client.connect()`) before locks are taken: node-redis rejects
 * commands of a client that is not open with "The client is closed".
 *
 * For the inspector, the port also has `command` (the client's `sendCommand()`), the client's
 * `keyPrefix` (node-redis 6), and on a cluster `masters` (`cluster.masters` and
 * `cluster.nodeClient()`).
 *
 * @throws LockConfigurationError when `client` lacks `set`, `evalSha` or `eval`.
 */
export function fromNodeRedis(client: NodeRedisClient): RedisCommands {
  requireMethods(client, 'node-redis', ['set', 'evalSha', 'eval'])
  // Read by shape: NodeRedisClient declares only what the provider needs. A cluster's
  // sendCommand() takes (firstKey, isReadonly, args), a client's (args).
  const c = client as unknown as {
    sendCommand?: (...args: unknown[]) => Promise<unknown>
    nodeClient?: (node: unknown) => unknown
    masters?: unknown
    getMasters?: () => unknown
    options?: { keyPrefix?: unknown }
    _options?: { keyPrefix?: unknown }
  }
  const send = c.sendCommand
  const cluster = typeof c.nodeClient === 'function'
  const keyPrefix = prefixText((c.options ?? c._options)?.keyPrefix)
  const masters = async (): Promise<RedisCommand[]> => {
    const nodes = Array.isArray(c.masters) ? c.masters : typeof c.getMasters === 'function' ? c.getMasters() : []
    const clients = await Promise.all(
      (nodes as unknown[]).map(
        async (node) => (await c.nodeClient!(node)) as { sendCommand(args: string[]): Promise<unknown> },
      ),
    )
    return clients.map(
      (node): RedisCommand =>
        (args) =>
          node.sendCommand([...args]),
    )
  }
  const setReply: SetReply = {
    send: (key, value, milliseconds) => client.set(key, value, { PX: milliseconds, NX: true }),
    // A client with a type mapping may return the reply as a Buffer; String() covers both.
    acquired: (reply) => String(reply) === 'OK',
  }
  const port: RedisCommands = {
    client: 'node-redis',
    setIfAbsent: async (key, value, milliseconds) =>
      setReply.acquired(await client.set(key, value, { PX: milliseconds, NX: true })),
    evalSha(sha1, key, args, moreKeys = []) {
      try {
        return promised(client.evalSha(sha1, { keys: [key, ...moreKeys], arguments: [...args] }))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    eval(script, key, args, moreKeys = []) {
      try {
        return promised(client.eval(script, { keys: [key, ...moreKeys], arguments: [...args] }))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    ...(typeof send === 'function' && {
      command: (args) => (cluster ? send.call(client, undefined, true, [...args]) : send.call(client, [...args])),
    }),
    ...(typeof send === 'function' && {
      // Both sent in this turn, so that they leave on the same connection one after the other (on
      // a cluster, the connection to the key's node: WAIT is routed by the key passed with it).
      setIfAbsentAndWait: async (key, value, milliseconds, replicas, waitMilliseconds) => {
        const wait = ['WAIT', String(replicas), String(waitMilliseconds)]
        const set = client.set(key, value, { PX: milliseconds, NX: true })
        const acked = cluster ? send.call(client, key, false, wait) : send.call(client, wait)
        const [setAnswer, waitAnswer] = await Promise.all([set, acked])
        return { set: setReply.acquired(setAnswer), replicas: Number(waitAnswer) }
      },
      evalAndWait: async (script, keys, args, replicas, waitMilliseconds) => {
        const wait = ['WAIT', String(replicas), String(waitMilliseconds)]
        const evaluated = client.eval(script, { keys: [...keys], arguments: [...args] })
        const acked = cluster ? send.call(client, keys[0], false, wait) : send.call(client, wait)
        const [reply, waitAnswer] = await Promise.all([evaluated, acked])
        return { reply, replicas: Number(waitAnswer) }
      },
    }),
    ...(cluster && { masters }),
    ...(keyPrefix !== undefined && { keyPrefix }),
  }
  return withSetReply(port, setReply)
}
