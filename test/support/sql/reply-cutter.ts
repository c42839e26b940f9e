import { connect, createServer, type Server, type Socket } from 'node:net'

/** What happens to the server's replies on one proxied connection. */
type ReplyMode = 'forward' | 'drop' | 'reset'

interface Pair {
  readonly client: Socket
  readonly upstream: Socket
  mode: ReplyMode
}

/**
 * A TCP proxy on 127.0.0.1 that forwards both ways and, on demand, cuts the replies of the
 * connections open at that moment, after their statements reached the server: `dropReplies()`
 * forwards what the client sends but never what the server answers (the server runs and commits
 * the statement; the client hears nothing), `resetAtNextReply()` resets the connection as the
 * server's next reply arrives (it committed, then the link broke). Connections opened later are
 * forwarded as usual, as a fresh connection after a lost one would be.
 */
export class ReplyCutter {
  readonly #server: Server
  readonly #target: number
  readonly #pairs = new Set<Pair>()
  #port = 0

  private constructor(target: number) {
    this.#target = target
    this.#server = createServer((client) => this.#accept(client))
  }

  /** Starts a proxy to 127.0.0.1:`target` on a free port. */
  static async start(target: number): Promise<ReplyCutter> {
    const proxy = new ReplyCutter(target)
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject)
      proxy.#server.listen(0, '127.0.0.1', resolve)
    })
    proxy.#port = (proxy.#server.address() as { port: number }).port
    return proxy
  }

  /** The port clients connect to. */
  get port(): number {
    return this.#port
  }

  /** The connections open now answer nothing more; the server still gets what they send. */
  dropReplies(): void {
    for (const pair of this.#pairs) pair.mode = 'drop'
  }

  /** The connections open now are reset when the server next answers on them. */
  resetAtNextReply(): void {
    for (const pair of this.#pairs) pair.mode = 'reset'
  }

  async close(): Promise<void> {
    for (const pair of this.#pairs) this.#end(pair)
    await new Promise((resolve) => this.#server.close(resolve))
  }

  #accept(client: Socket): void {
    const upstream = connect(this.#target, '127.0.0.1')
    const pair: Pair = { client, upstream, mode: 'forward' }
    this.#pairs.add(pair)
    client.on('data', (data) => upstream.write(data))
    upstream.on('data', (data) => {
      if (pair.mode === 'forward') client.write(data)
      else if (pair.mode === 'reset') this.#end(pair)
    })
    const end = (): void => this.#end(pair)
    for (const socket of [client, upstream]) {
      socket.on('error', end)
      socket.on('close', end)
    }
  }

  #end(pair: Pair): void {
    if (!this.#pairs.delete(pair)) return
    pair.client.resetAndDestroy()
    pair.upstream.destroy()
  }
}
