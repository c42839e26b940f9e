import type { RedisCommand, RedisCommands } from './commands.ts'

/** How many keys one `SCAN` call asks for. */
const SCAN_COUNT = '1000'

/** A reply element as text: clients return strings, or Buffers with some type mappings. */
export function textOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8')
  if (typeof value === 'number') return String(value)
  return undefined
}

/** The nodes to SCAN: every master of a Cluster client, else the node `command` reaches. */
export async function scanNodes(
  commands: RedisCommands,
  command: RedisCommand,
  bounded: <T>(promise: Promise<T>) => Promise<T>,
): Promise<RedisCommand[]> {
  // A SCAN cursor belongs to one node: a Cluster is scanned master by master.
  const masters = commands.masters ? await bounded(commands.masters()) : []
  return masters.length > 0 ? [...masters] : [command]
}

/**
 * Every key matching `pattern` (a `SCAN … MATCH` pattern, the client's own `keyPrefix` included)
 * on the `nodes`, with the client's `keyPrefix` stripped: clients add it to the keys they send,
 * not to those SCAN returns. Each SCAN page (1000 keys) is bounded by `bounded`.
 */
export async function scanKeys(
  nodes: readonly RedisCommand[],
  pattern: string,
  clientPrefix: string,
  bounded: <T>(promise: Promise<T>) => Promise<T>,
): Promise<Set<string>> {
  const keys = new Set<string>()
  for (const node of nodes) {
    let cursor = '0'
    do {
      const reply = await bounded(node(['SCAN', cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT]))
      if (!Array.isArray(reply) || !Array.isArray(reply[1]))
        throw new Error(`SCAN answered ${JSON.stringify(reply)}, not [cursor, keys]`)
      cursor = textOf(reply[0]) ?? '0'
      for (const found of reply[1] as unknown[]) {
        const key = textOf(found)
        if (key?.startsWith(clientPrefix)) keys.add(key.slice(clientPrefix.length))
      }
    } while (cursor !== '0')
  }
  return keys
}
