import { connect, createServer, type Server, type Socket } from 'node:net'

/**
 * How a {@link TcpProxy} cuts the network:
 * - `reset`: open connections are reset (RST) and new ones are reset at once, as when the store's
 *   host or a firewall rejects traffic;
 * - `blackhole`: open connections stay up but nothing gets through either way, and new
 *   connections are accepted but never answered, as in a network partition: only the client's
 *   own timeouts notice.
 */
export type CutMode = 'reset' | 'blackhole'

/**
 * A TCP proxy on 127.0.0.1 between a client and a store, for network cuts in the middle of a
 * task. Point the client at `port`; `cut()` breaks the path, `restore()` repairs it for new
 * connections (connections that lived through a blackhole are reset then: their streams lost
 * bytes and cannot resume).
 */
export class TcpProxy {
  readonly #server: Server
  readonly #target: number
  readonly #pairs = new Set<{ client: Socket; upstream: Socket | undefined }>()
  #mode: CutMode | undefined
  #port = 0
  /** Connections accepted since the start. */
  connections = 0

  private constructor(target: number) {
    this.#target = target
    this.#server = createServer((client) => this.#accept(client))
  }

  /** Starts a proxy to 127.0.0.1:`target` on a free port. */
  static async start(target: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(target)
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

  /** The current cut, if any. */
  get mode(): CutMode | undefined {
    return this.#mode
  }

  cut(mode: CutMode): void {
    this.#mode = mode
    for (const pair of this.#pairs) {
      if (mode === 'reset') this.#reset(pair)
      else {
        // Stop reading both ways: whatever either side sends stays in kernel buffers, unanswered.
        pair.client.unpipe()
        pair.upstream?.unpipe()
        pair.client.pause()
        pair.upstream?.pause()
      }
    }
  }

  restore(): void {
    this.#mode = undefined
    for (const pair of this.#pairs) this.#reset(pair)
  }

  async close(): Promise<void> {
    for (const pair of this.#pairs) this.#reset(pair)
    await new Promise((resolve) => this.#server.close(resolve))
  }

  #accept(client: Socket): void {
    this.connections++
    const pair: { client: Socket; upstream: Socket | undefined } = { client, upstream: undefined }
    this.#pairs.add(pair)
    client.on('error', () => {})
    client.on('close', () => {
      this.#pairs.delete(pair)
      pair.upstream?.destroy()
    })
    if (this.#mode === 'reset') {
      this.#reset(pair)
      return
    }
    if (this.#mode === 'blackhole') {
      client.pause()
      return
    }
    const upstream = connect({ host: '127.0.0.1', port: this.#target })
    pair.upstream = upstream
    upstream.on('error', () => this.#reset(pair))
    upstream.on('close', () => client.destroy())
    client.pipe(upstream)
    upstream.pipe(client)
  }

  #reset(pair: { client: Socket; upstream: Socket | undefined }): void {
    this.#pairs.delete(pair)
    for (const socket of [pair.client, pair.upstream]) {
      try {
        socket?.resetAndDestroy()
      } catch {
        // Not connected yet: there is nothing to reset.
        socket?.destroy()
      }
    }
  }
}
