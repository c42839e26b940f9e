import {
  prefixText,
  promised,
  type RedisCommand,
  type RedisCommands,
  requireMethods,
  type SetReply,
  withSetReply,
} from './commands.ts'

/**
 * The part of an ioredis (5 or 6) `Redis` or `Cluster` client that {@link fromIoredis} calls. We
 * don't import ioredis: any object with these methods works.
 */
export interface IoredisClient {
  set(key: string, value: string, millisecondsToken: 'PX', milliseconds: number, nx: 'NX'): Promise<unknown>
  evalsha(sha1: string, numkeys: number, ...args: string[]): Promise<unknown>
  eval(script: string, numkeys: number, ...args: string[]): Promise<unknown>
}

/** The part of an ioredis pipeline that `setIfAbsentAndWait` and `evalAndWait` use. */
interface IoredisPipeline {
  set(key: string, value: string, millisecondsToken: 'PX', milliseconds: number, nx: 'NX'): IoredisPipeline
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): IoredisPipeline
  wait(replicas: number, milliseconds: number): IoredisPipeline
  exec(): Promise<[Error | null, unknown][] | null>
}

/**
 * Adapts an ioredis `Redis` or `Cluster` client. Options of the client apply: its `keyPrefix`,
 * if set, is prepended to every lock key (Java ShedLock sharing the store must use the same
 * prefix), and its offline queue and retry settings decide how long a command waits while Redis
 * is down (the provider's `timeout` bounds that wait).
 *
 * For the inspector, the port also has `command` (the client's `call()`), the client's
 * `keyPrefix`, and on a `Cluster` `masters` (`cluster.nodes('master')`).
 *
 * @throws LockConfigurationError when `client` lacks `set`, `evalsha` or `eval`.
 */
export function fromIoredis(client: IoredisClient): RedisCommands {
  requireMethods(client, 'ioredis', ['set', 'evalsha', 'eval'])
  // Read by shape: IoredisClient declares only what the provider needs.
  const c = client as unknown as {
    call?: (command: string, ...args: string[]) => Promise<unknown>
    isCluster?: unknown
    nodes?: (role: 'master') => readonly { call(command: string, ...args: string[]): Promise<unknown> }[]
    options?: { keyPrefix?: unknown; redisOptions?: { keyPrefix?: unknown } }
    pipeline?: () => IoredisPipeline
  }
  const call = c.call
  const keyPrefix = prefixText(c.options?.keyPrefix ?? c.options?.redisOptions?.keyPrefix)
  const setReply: SetReply = {
    send: (key, value, milliseconds) => client.set(key, value, 'PX', milliseconds, 'NX'),
    acquired: (reply) => reply === 'OK',
  }
  // After a failover, ioredis does not redirect a Cluster pipeline whose key moved: WAIT answers
  // on the old node, so the replies are not all redirections, and its slot map stays old; every
  // later acquisition went to the old node (MOVED) until the map's next refresh, which a loaded
  // cluster can postpone for good. A keyed command through the Cluster follows the MOVED and
  // updates the map; then the pipeline is sent once more: its first command did not run.
  const followedMove = async (replies: [Error | null, unknown][] | null, key: string): Promise<boolean> => {
    const error = replies?.[0]?.[0]
    if (c.isCluster !== true || typeof call !== 'function' || !error?.message.startsWith('MOVED ')) return false
    await call.call(client, 'EXISTS', key)
    return true
  }
  const port: RedisCommands = {
    client: 'ioredis',
    setIfAbsent: async (key, value, milliseconds) => (await client.set(key, value, 'PX', milliseconds, 'NX')) === 'OK',
    // Not async functions: the client's promise is returned as it is (an async wrapper adds a
    // promise and two turns per call); a synchronous throw still becomes a rejection.
    evalSha(sha1, key, args, moreKeys) {
      try {
        if (moreKeys !== undefined && moreKeys.length > 0)
          return promised(client.evalsha(sha1, 1 + moreKeys.length, key, ...moreKeys, ...args))
        // The provider's scripts take one or two arguments: passed as they are, not spread.
        return promised(
          args.length === 1
            ? client.evalsha(sha1, 1, key, args[0]!)
            : args.length === 2
              ? client.evalsha(sha1, 1, key, args[0]!, args[1]!)
              : client.evalsha(sha1, 1, key, ...args),
        )
      } catch (error) {
        return Promise.reject(error)
      }
    },
    eval(script, key, args, moreKeys = []) {
      try {
        return promised(client.eval(script, 1 + moreKeys.length, key, ...moreKeys, ...args))
      } catch (error) {
        return Promise.reject(error)
      }
    },
    ...(typeof call === 'function' && { command: ([name, ...args]) => call.call(client, name!, ...args) }),
    ...(typeof c.pipeline === 'function' && {
      // One pipeline: on one connection, in order; a Cluster client sends it to the node of the
      // SET's key, which is where WAIT must run. Not MULTI: inside a transaction WAIT does not wait.
      setIfAbsentAndWait: async (key, value, milliseconds, replicas, waitMilliseconds) => {
        const send = () =>
          c.pipeline!().set(key, value, 'PX', milliseconds, 'NX').wait(replicas, waitMilliseconds).exec()
        let replies = await send()
        if (await followedMove(replies, key)) replies = await send()
        const [[setError, setReply] = [], [waitError, waitReply] = []] = replies ?? []
        if (setError) throw setError
        if (waitError) throw waitError
        return { set: setReply === 'OK', replicas: Number(waitReply) }
      },
      evalAndWait: async (script, keys, args, replicas, waitMilliseconds) => {
        const send = () =>
          c.pipeline!()
            .eval(script, keys.length, ...keys, ...args)
            .wait(replicas, waitMilliseconds)
            .exec()
        let replies = await send()
        if (await followedMove(replies, keys[0]!)) replies = await send()
        const [[evalError, evalReply] = [], [waitError, waitReply] = []] = replies ?? []
        if (evalError) throw evalError
        if (waitError) throw waitError
        return { reply: evalReply, replicas: Number(waitReply) }
      },
    }),
    ...(c.isCluster === true &&
      typeof c.nodes === 'function' && {
        masters: async () =>
          c.nodes!('master').map(
            (node): RedisCommand =>
              ([name, ...args]) =>
                node.call(name!, ...args),
          ),
      }),
    ...(keyPrefix !== undefined && { keyPrefix }),
  }
  return withSetReply(port, setReply)
}
