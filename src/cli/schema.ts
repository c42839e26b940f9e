import { parseArgs } from 'node:util'
import { STORES, storeNamed } from '../providers/registry.ts'
import { type Command, EXIT_OK, UsageError } from './command.ts'
import { parseStoreUrl } from './store-url.ts'

/** The stores grouped by what `schema` prints for them, one line a group, from the registry. */
function storesByOutput(): string {
  const groups = new Map<string, string[]>()
  for (const store of STORES) {
    groups.set(store.schemaPrints, [...(groups.get(store.schemaPrints) ?? []), store.id])
  }
  const rows = [...groups].map(([prints, names]) => [names.join(', '), prints] as const)
  const width = Math.max(...rows.map(([names]) => names.length))
  return rows.map(([names, prints]) => `  ${names.padEnd(width)}   ${prints}`).join('\n')
}

const HELP = `Usage: shedlock schema STORE [--table NAME] [--fencing-tokens]

Prints what the store's provider needs, to put in your migrations:
${storesByOutput()}
Aliases: ${STORES.flatMap((s) => (s.aliases ?? []).map((alias) => `${alias} (${s.id})`)).join(', ')}.
STORE may also be a store URL; without STORE, the scheme of $SHEDLOCK_URL.
"shedlock init --url URL" creates the same directly.

Options:
  --table NAME   table, collection or DynamoDB table name
                 (default: shedlock; MongoDB: shedLock; DynamoDB: Shedlock)
  --fencing-tokens
                 SQL: with the fencing_token column (BIGINT NULL) that
                 providers with fencingTokens: true need; for an existing
                 table:
                   ALTER TABLE shedlock ADD COLUMN fencing_token BIGINT NULL;
                 (SQLite: INTEGER)
  -h, --help     show this help

Exit codes: 0 printed, 2 usage error
`

/** `shedlock schema`. */
export const schemaCommand: Command = {
  name: 'schema',
  summary: 'print the CREATE TABLE (or what a store needs) for migrations',
  help: HELP,
  async run(args) {
    let parsed: { values: { table?: string | undefined; 'fencing-tokens'?: boolean }; positionals: string[] }
    try {
      parsed = parseArgs({
        args,
        options: { table: { type: 'string' }, 'fencing-tokens': { type: 'boolean' } },
        strict: true,
        allowPositionals: true,
      })
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message.split('\n')[0]!.replace(/\.$/, '') : String(error))
    }
    const { values, positionals } = parsed
    if (positionals.length > 1)
      throw new UsageError(`one STORE at a time, got ${positionals.map((p) => JSON.stringify(p)).join(', ')}`)
    const given = positionals[0] ?? process.env.SHEDLOCK_URL
    if (given === undefined || given === '')
      throw new UsageError(`name the store: shedlock schema ${STORES.map((s) => s.id).join(', ')}`)
    const store = storeNamed(given) ?? (given.includes(':') ? parseStoreUrl(given).store : undefined)
    if (!store)
      throw new UsageError(
        `unknown store ${JSON.stringify(given)}: use ${STORES.flatMap((s) => [s.id, ...(s.aliases ?? [])]).join(', ')}`,
      )
    if (values.table !== undefined && !store.table)
      throw new UsageError(`--table does not apply to ${store.id}: ${store.insteadOfTable ?? 'it keeps no table'}`)
    const fencingTokens = values['fencing-tokens'] === true
    if (fencingTokens && store.table?.what !== 'SQL table')
      throw new UsageError(
        `--fencing-tokens applies to SQL stores (a column of the lock table); ${store.id} needs nothing created for them`,
      )
    process.stdout.write(`${(await store.load()).schema(values.table, { fencingTokens })}\n`)
    return EXIT_OK
  },
}
