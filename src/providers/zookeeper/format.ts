import { LockConfigurationError } from '../../core/errors.ts'
import { nameTooLong, utf8LengthOver } from '../../support/lock-request.ts'
import {
  type DescribeStoreError,
  messageOf,
  outcomeOf,
  redactUrlPasswords,
  storeError,
} from '../../support/store-errors.ts'
import { OperationTimeoutError } from '../../support/with-timeout.ts'

// Java ShedLock's layout in ZooKeeper (its ZookeeperCuratorLockProvider): one persistent node
// <path>/<node name> per lock whose data is lockUntil as ISO-8601 text; the node name of each lock
// name and its inverse, the root path's rules, and what ZooKeeper's errors mean. The provider,
// the inspector and the CLI read it from here.

/** The provider's name, as `LockProvider.name`, `LockInspector.name` and error messages give it. */
export const PROVIDER = 'zookeeper'

/** Where lock nodes live unless `path` says otherwise: Java ShedLock's default. */
export const DEFAULT_ROOT = '/shedlock'

// The longest node path sent. ZooKeeper (jute.maxbuffer, 0xfffff bytes by default) closes the
// connection on a larger request: with this client's create (24 bytes of data, the open ACL)
// that happens from a path of 1,048,505 bytes. A lock node is created in a multi that carries
// the path twice (create and setData), so half of that, and 24 KB for the rest of the request.
const MAX_PATH_BYTES = 500_000

/** ZooKeeper error codes (KeeperException.Code), as node-zookeeper-client reports them in `code`. */
export const CODE = {
  CONNECTION_LOSS: -4,
  OPERATION_TIMEOUT: -7,
  NO_NODE: -101,
  NO_AUTH: -102,
  BAD_VERSION: -103,
  NODE_EXISTS: -110,
  SESSION_EXPIRED: -112,
  AUTH_FAILED: -115,
} as const

/** Does `error` carry ZooKeeper error code `code`? */
export function hasCode(error: unknown, code: number): boolean {
  return (error as { code?: unknown } | null)?.code === code
}

// ZooKeeper's PathUtils.validatePath refuses these in any path (it checks UTF-16 code units,
// hence every character beyond U+FFFF, whose surrogates fall in U+D800–U+DFFF); an escaped name
// also escapes '/' and '%'.
const ESCAPED = /[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff\u{10000}-\u{10ffff}%/]/gu
const INVALID_IN_PATH = /[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff\u{10000}-\u{10ffff}]/u

/**
 * The node name (a path segment below `path`) that holds lock `name`. Every name ZooKeeper
 * accepts as a node name maps to itself, the node Java ShedLock uses, `%` included. A name
 * ZooKeeper cannot hold is percent-escaped, as `%` and the two uppercase hex digits of each UTF-8
 * byte: `/` (the path separator: ZooKeeper would nest the node), the characters ZooKeeper refuses
 * in paths (U+0000–U+001F, U+007F–U+009F, U+E000–U+F8FF, U+FFF0–U+FFFF and every character
 * beyond U+FFFF, whose UTF-16 surrogates ZooKeeper's server refuses), and, in such a name only,
 * `%` itself. A lone surrogate becomes `%u` and its four hex digits. The names `.` and `..`
 * become `%2E` and `%2E%2E`. {@link zookeeperLockName} is its inverse.
 *
 * No two names share a node: a name ZooKeeper could hold but that is exactly the escaped node of
 * another name (such as `a%2Fb`, the node of `a/b`) is refused.
 *
 * ```ts
 * zookeeperNodeName('nightly report') // 'nightly report'
 * zookeeperNodeName('100%')           // '100%'
 * zookeeperNodeName('reports/daily')  // 'reports%2Fdaily'
 * zookeeperNodeName('100%/day')       // '100%25%2Fday'
 * zookeeperNodeName('a%2Fb')          // throws LockConfigurationError
 * ```
 *
 * @throws LockConfigurationError for a name that is the escaped node of another name.
 */
export function zookeeperNodeName(name: string): string {
  if (!holdable(name)) return escapeNodeName(name)
  // Names ZooKeeper holds map to themselves, so the escaped node of a name it cannot hold must
  // never be taken as a raw one.
  const decoded = escapedName(name)
  if (decoded !== undefined) {
    throw new LockConfigurationError(
      `Lock name ${JSON.stringify(name)} is the ZooKeeper node of the lock name ${JSON.stringify(decoded)}, which ZooKeeper cannot hold as it is; use another name (shedlock refuses it so that no two names share a node)`,
    )
  }
  return name
}

/**
 * The lock name a node holds: the inverse of {@link zookeeperNodeName}. A node is the escaped
 * form of a name only when `zookeeperNodeName()` gives exactly that node for the decoded name;
 * every other node (all nodes Java ShedLock writes, `100%` included) is the name itself.
 *
 * ```ts
 * zookeeperLockName('reports%2Fdaily') // 'reports/daily'
 * zookeeperLockName('100%')            // '100%'
 * zookeeperLockName('100%25')          // '100%25' (a name ZooKeeper holds as it is)
 * ```
 */
export function zookeeperLockName(node: string): string {
  return escapedName(node) ?? node
}

/**
 * The name whose escaped node `node` is, or `undefined` when `node` is no name's escaped node (it
 * is then the name itself). The one decoder of the escaping: {@link zookeeperNodeName} refuses
 * raw names for which it finds one, {@link zookeeperLockName} reads nodes with it.
 */
function escapedName(node: string): string | undefined {
  if (!node.includes('%')) return undefined
  const decoded = unescapeNodeName(node)
  // Names ZooKeeper holds as they are are never escaped, and the escaping is unique: only its
  // own output decodes.
  return decoded !== node && decoded !== '' && !holdable(decoded) && escapeNodeName(decoded) === node
    ? decoded
    : undefined
}

/** Can `name` be a node name as it is? */
function holdable(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !INVALID_IN_PATH.test(name)
}

function escapeNodeName(name: string): string {
  if (name === '.' || name === '..') return name.replaceAll('.', '%2E')
  return name.replace(ESCAPED, (character) => {
    const code = character.codePointAt(0)!
    if (character.length === 1 && code >= 0xd800 && code <= 0xdfff)
      return `%u${code.toString(16).toUpperCase().padStart(4, '0')}`
    let escaped = ''
    for (const byte of Buffer.from(character, 'utf8')) escaped += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
    return escaped
  })
}

/** What `node` reads as when every `%XX` and `%uXXXX` in it is taken as an escape. */
function unescapeNodeName(node: string): string {
  let name = ''
  let bytes: number[] = []
  const flush = (): void => {
    if (bytes.length > 0) name += Buffer.from(bytes).toString('utf8')
    bytes = []
  }
  for (let i = 0; i < node.length; i++) {
    const char = node[i]!
    const hex = node.slice(i + 1, i + 3)
    if (char === '%' && node[i + 1] === 'u' && /^[0-9A-F]{4}$/.test(node.slice(i + 2, i + 6))) {
      flush()
      name += String.fromCharCode(Number.parseInt(node.slice(i + 2, i + 6), 16))
      i += 5
    } else if (char === '%' && /^[0-9A-F]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16))
      i += 2
    } else {
      flush()
      name += char
    }
  }
  flush()
  return name
}

/**
 * `path` checked as the parent of lock nodes: absolute, below the root, outside `/zookeeper`.
 * @throws LockConfigurationError naming what is wrong with it.
 */
export function validRoot(path: unknown): string {
  const fail = (why: string): never => {
    throw new LockConfigurationError(
      `zookeeper: path ${JSON.stringify(path)} ${why}; pass an absolute path below the root such as "/shedlock"`,
    )
  }
  if (typeof path !== 'string' || path === '') return fail('is not a non-empty string')
  if (!path.startsWith('/')) return fail('does not start with "/"')
  if (path === '/') return fail('is the root, which cannot hold lock nodes next to ZooKeeper\'s own "/zookeeper"')
  if (path.endsWith('/')) return fail('ends with "/"')
  const segments = path.slice(1).split('/')
  if (segments.some((s) => s === '')) return fail('has an empty segment ("//")')
  if (segments.some((s) => s === '.' || s === '..')) return fail('has a relative segment ("." or "..")')
  if (segments[0] === 'zookeeper') return fail('is inside "/zookeeper", which ZooKeeper reserves')
  if (INVALID_IN_PATH.test(path))
    return fail(
      'contains characters ZooKeeper refuses in paths (control characters, U+E000–U+F8FF, U+FFF0–U+FFFF or characters beyond U+FFFF)',
    )
  return path
}

/**
 * The path of lock `name`'s node below `root`, checked before anything is sent: an oversized
 * request drops the connection of every lock.
 * @throws LockConfigurationError for a refused name or a path over 500,000 bytes.
 */
export function lockNodePath(root: string, name: string): string {
  const node = `${root}/${zookeeperNodeName(name)}`
  const bytes = utf8LengthOver(node, MAX_PATH_BYTES)
  if (bytes !== undefined)
    throw nameTooLong(PROVIDER, name, bytes, MAX_PATH_BYTES, 'bytes', `its node's path ${JSON.stringify(`${root}/…`)}`)
  return node
}

/** A node's data: `lockUntil` as Java's `Utils.toIsoString` writes it, UTC with exactly 3 fraction digits. */
export function encodeLockUntil(ms: number): Buffer {
  return Buffer.from(new Date(ms).toISOString(), 'utf8')
}

// What Java's Instant.parse accepts in practice: seconds required, 0-9 fraction digits, Z or an offset.
const ISO_INSTANT = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/

/**
 * The `lockUntil` (epoch ms) in a node's data, or `undefined` when the data is empty or not an
 * ISO-8601 instant: such a node (left by ShedLock before 2.5, which used ephemeral nodes, or a
 * stranger's) counts as held, as in Java.
 */
export function decodeLockUntil(data: Buffer | undefined): number | undefined {
  if (!data || data.length === 0) return undefined
  const match = ISO_INSTANT.exec(data.toString('utf8').trim())
  if (!match) return undefined
  const ms = Date.parse(`${match[1]}.${(match[2] ?? '').slice(0, 3).padEnd(3, '0')}${match[3]}`)
  return Number.isNaN(ms) ? undefined : ms
}

/** What `shedlock schema zookeeper` prints: nothing to create but the parent node. */
export function zookeeperSchema(root: string = DEFAULT_ROOT): string {
  return `# ZooKeeper needs no schema: each lock is a persistent node ${root}/<name> holding lockUntil as ISO-8601 text; "shedlock init" creates ${root}.`
}

/** What a ZooKeeper error means for the lock (or the listing) and what to do about it. */
export function describeZooKeeperError(root: string, timeout: number): DescribeStoreError {
  return (error, action, lockName) => {
    const detail = redactUrlPasswords(messageOf(error))
    const code = (error as { code?: unknown } | null)?.code
    let advice: string
    if (error instanceof OperationTimeoutError) {
      advice = `no reply from ZooKeeper within ${timeout}ms (the client is disconnected, or was never connected: call client.connect()); ${outcomeOf(action)}. The provider recovers by itself once the client reconnects; a client that stays disconnected long after the server is back must be replaced (see the client option)`
    } else if (code === CODE.CONNECTION_LOSS || code === CODE.OPERATION_TIMEOUT) {
      advice = `the connection to ZooKeeper was lost, or the client was closed (${detail}); ${outcomeOf(action)}. The provider recovers by itself once the client reconnects`
    } else if (code === CODE.SESSION_EXPIRED) {
      advice = `the ZooKeeper session expired (${detail}), after which node-zookeeper-client never reconnects; ${outcomeOf(action)}. Create a new client when the client emits "expired", and pass the provider a function that returns the current client`
    } else if (code === CODE.NO_AUTH || code === CODE.AUTH_FAILED) {
      advice = `ZooKeeper refused access (${detail}); give the client's identity read, write and create permission on ${root} and its children`
    } else {
      advice = detail
    }
    return storeError(PROVIDER, action, lockName, advice, error)
  }
}
