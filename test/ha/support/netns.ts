import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * One private network of the topology suite: a bridge on the host with 10.231.<subnet>.1/24, and
 * per store node a network namespace joined to it by a veth pair, with its own address
 * (10.231.<subnet>.<10 + i>) and its own port space (each server keeps its default port). No
 * default route anywhere: nothing leaves the subnet. The test process (the nodes that take
 * locks) talks to the store nodes from the host through the bridge.
 *
 * Faults: `isolate(node)` takes the node's link down (everything it sends or receives is lost,
 * as a cut cable: TCP connections stall, nothing is reset), `cutBetween(a, b)` drops only what a
 * sends to b (a blackhole route in a's namespace), `heal` undoes either.
 */
export class PrivateNetwork {
  readonly bridge: string
  readonly prefix: string
  readonly #tag: string
  readonly #nodes = new Map<string, Node>()
  readonly #children = new Set<ChildProcess>()

  constructor(subnet: number) {
    this.#tag = `${process.pid % 10_000}${subnet}`
    this.bridge = `shb${this.#tag}`
    this.prefix = `10.231.${subnet}`
  }

  /** Creates the bridge; refuses a subnet the host already routes (it must stay private). */
  up(): void {
    if (ip(['route']).includes(`${this.prefix}.0/24`))
      throw new Error(`${this.prefix}.0/24 is already routed on this host; pick another subnet`)
    ip(['link', 'add', this.bridge, 'type', 'bridge'])
    ip(['addr', 'add', `${this.prefix}.1/24`, 'dev', this.bridge])
    ip(['link', 'set', this.bridge, 'up'])
  }

  /** A namespace for store node `name`, reachable at the returned address. */
  add(name: string): string {
    const i = this.#nodes.size
    const node = {
      ns: `sh${this.#tag}-${name}`,
      veth: `sv${this.#tag}${i}`,
      ip: `${this.prefix}.${10 + i}`,
      mac: `02:00:0a:e7:${hex(Number(this.prefix.split('.')[2]))}:${hex(10 + i)}`,
    }
    this.#plug(node)
    this.#nodes.set(name, node)
    return node.ip
  }

  #plug(node: Node): void {
    ip(['netns', 'add', node.ns])
    ip(['link', 'add', node.veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', node.ns])
    ip(['link', 'set', node.veth, 'master', this.bridge])
    ip(['link', 'set', node.veth, 'up'])
    // A fixed MAC: a node rebuilt by crash() answers the others' ARP caches at once.
    ip(['-n', node.ns, 'link', 'set', 'eth0', 'address', node.mac])
    ip(['-n', node.ns, 'addr', 'add', `${node.ip}/24`, 'dev', 'eth0'])
    ip(['-n', node.ns, 'link', 'set', 'eth0', 'up'])
    ip(['-n', node.ns, 'link', 'set', 'lo', 'up'])
  }

  address(name: string): string {
    return this.#node(name).ip
  }

  /** Starts `command` inside node `name`'s namespace (as `user` when given), logging to `<dir>/<log>`. */
  spawn(name: string, command: string[], options: { dir: string; log: string; user?: string }): ChildProcess {
    const as = options.user ? ['setpriv', `--reuid=${options.user}`, `--regid=${options.user}`, '--init-groups'] : []
    const log = openSync(join(options.dir, options.log), 'a')
    // `ip netns exec` and setpriv exec the command: the child's pid is the server's.
    const child = spawn('ip', ['netns', 'exec', this.#node(name).ns, ...as, ...command], {
      stdio: ['ignore', log, log],
      cwd: options.dir,
    })
    closeSync(log)
    child.once('error', () => {})
    this.#children.add(child)
    child.once('exit', () => this.#children.delete(child))
    return child
  }

  /** Starts `command` inside node `name`'s namespace with its stdout piped back (stderr to `<dir>/<log>`). */
  spawnPiped(name: string, command: string[], options: { dir: string; log: string }): ChildProcess {
    const log = openSync(join(options.dir, options.log), 'a')
    const child = spawn('ip', ['netns', 'exec', this.#node(name).ns, ...command], {
      stdio: ['ignore', 'pipe', log],
      cwd: options.dir,
    })
    closeSync(log)
    child.once('error', () => {})
    this.#children.add(child)
    child.once('exit', () => this.#children.delete(child))
    return child
  }

  /** Runs `command` inside node `name`'s namespace and returns its output. */
  exec(name: string, command: string[], user?: string): string {
    const as = user ? ['setpriv', `--reuid=${user}`, `--regid=${user}`, '--init-groups'] : []
    return execFileSync('ip', ['netns', 'exec', this.#node(name).ns, ...as, ...command], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    })
  }

  /**
   * Crashes node `name`'s machine: kills every process in its namespace (SIGKILL) and replaces the
   * namespace with a fresh one at the same address, as a reboot would. Killing the processes alone
   * is not a crash: their kernel survives and still sends what they had written (a lock the
   * primary had queued for its replica reaches it once a cut heals), and closes their connections
   * cleanly. With the namespace gone, unsent data is lost and peers get nothing until they next
   * send and the fresh kernel answers with a reset.
   */
  crash(name: string): void {
    const node = this.#node(name)
    for (const pid of ip(['netns', 'pids', node.ns]).split('\n').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL')
      } catch {
        // Gone already.
      }
    }
    // The old stack lingers while its orphaned sockets retransmit, cut off: its veth goes with it.
    ip(['link', 'del', node.veth])
    ip(['netns', 'del', node.ns])
    this.#plug(node)
  }

  /** Cuts node `name` off the bridge: a partition of that node from everything else. */
  isolate(name: string): void {
    ip(['link', 'set', this.#node(name).veth, 'down'])
  }

  /** Drops what node `from` sends to node `to` (and so every TCP connection between them). */
  cutBetween(from: string, to: string): void {
    ip(['-n', this.#node(from).ns, 'route', 'add', 'blackhole', `${this.#node(to).ip}/32`])
  }

  /** Undoes every isolate() and cutBetween() of node `name`. */
  heal(name: string): void {
    const node = this.#node(name)
    ip(['link', 'set', node.veth, 'up'])
    for (const other of this.#nodes.values()) {
      try {
        ip(['-n', node.ns, 'route', 'del', 'blackhole', `${other.ip}/32`])
      } catch {
        // No such cut.
      }
    }
  }

  /** Kills every process it started, then removes the namespaces, veths and the bridge. */
  async down(): Promise<void> {
    for (const child of this.#children) child.kill('SIGKILL')
    for (let i = 0; i < 50 && this.#children.size > 0; i++) await sleep(100)
    for (const node of this.#nodes.values()) {
      // Whatever a namespace still runs (a process that forked) dies with it.
      try {
        for (const pid of ip(['netns', 'pids', node.ns]).split('\n').filter(Boolean))
          process.kill(Number(pid), 'SIGKILL')
      } catch {
        // Gone already.
      }
      quiet(() => ip(['link', 'del', node.veth]))
      quiet(() => ip(['netns', 'del', node.ns]))
    }
    this.#nodes.clear()
    quiet(() => ip(['link', 'del', this.bridge]))
  }

  #node(name: string): Node {
    const node = this.#nodes.get(name)
    if (!node) throw new Error(`no node ${name} in ${this.bridge}`)
    return node
  }
}

interface Node {
  ns: string
  veth: string
  ip: string
  mac: string
}

function hex(n: number): string {
  return n.toString(16).padStart(2, '0')
}

function ip(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

function quiet(f: () => unknown): void {
  try {
    f()
  } catch {
    // Best effort while cleaning up.
  }
}

/** Whether this process may build namespaces (root, `ip netns`). */
export function canBuildNamespaces(): boolean {
  if (process.getuid?.() !== 0) return false
  try {
    ip(['netns', 'list'])
    return true
  } catch {
    return false
  }
}

/** The last lines of a log, for a failure message. */
export function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n')
  } catch {
    return '(no log)'
  }
}
