import { type StoreEntry, STORES, storeOfScheme } from '../providers/registry.ts'
import { UsageError } from '../support/admin-errors.ts'
import { parseStoreUrl as parseUrlOf, redactUrl, type StoreUrl } from '../support/store-url.ts'

/** What `--help` texts list as accepted URLs: one line per store, its first scheme's form. */
export const URL_FORMS: string = STORES.map((store) => {
  const also =
    store.schemes.length > 1
      ? `(also ${store.schemes
          .slice(1)
          .map((scheme) => schemeForm(store, scheme, false))
          .join(', ')})`
      : ''
  const line = `  ${store.urlForm}${also ? `  ${also}` : ''}`
  // Help stays within 80 columns: a long form gets its other schemes on the next line.
  return line.length <= 80 ? line : `  ${store.urlForm}\n      ${also}`
}).join('\n')

/**
 * Parses a store URL and picks its store from the registry.
 * @throws UsageError for an empty URL or an unknown scheme, naming the accepted ones.
 */
export function parseStoreUrl(raw: string): StoreUrl & { readonly store: StoreEntry } {
  const text = raw.trim()
  if (text === '') throw new UsageError('the store URL is empty; pass --url URL or set SHEDLOCK_URL')
  const protocol = /^([a-z][a-z0-9+.-]*:)/i.exec(text)?.[1]?.toLowerCase()
  const store = protocol === undefined ? undefined : storeOfScheme(protocol)
  if (!store) {
    const accepted = STORES.flatMap((s) => s.schemes.map((scheme) => schemeForm(s, scheme, true)))
    throw new UsageError(
      `unknown store URL ${JSON.stringify(redactUrl(text))}: use ${accepted.slice(0, -1).join(', ')} or ${accepted.at(-1)}`,
    )
  }
  return { ...parseUrlOf(text, store.id, store.urlKind), store }
}

/** A scheme as help texts show it: `redis://`, or `sqlite:` (`sqlite:PATH` with `withPath`) for an opaque URL. */
function schemeForm(store: StoreEntry, scheme: string, withPath: boolean): string {
  if (store.urlKind !== 'opaque') return `${scheme}//`
  return withPath ? `${scheme}PATH` : scheme
}

/**
 * The store URL of a command: `--url`, else the `SHEDLOCK_URL` environment variable.
 * @throws UsageError when neither is set.
 */
export function storeUrlOption(
  values: Record<string, string | boolean | undefined>,
): StoreUrl & { readonly store: StoreEntry } {
  const given = typeof values.url === 'string' ? values.url : process.env.SHEDLOCK_URL
  if (given === undefined || given.trim() === '') {
    throw new UsageError('no store: pass --url URL or set SHEDLOCK_URL, e.g. --url postgres://app@db.internal/app')
  }
  return parseStoreUrl(given)
}

/** Help text of the `--url` and `--table` options, shared by the commands. */
export const URL_HELP: string = `  --url URL      the lock store (default: $SHEDLOCK_URL), e.g.
                 postgres://app@db/app, redis://cache:6379, sqlite:./locks.db;
                 "shedlock --help" lists every form
  --table NAME   ${wrapped(
    STORES.filter((s) => s.table)
      .map((s) => s.table!.what)
      .filter((what, i, all) => all.indexOf(what) === i)
      .join(', ')
      .replace(/, ([^,]*)$/, ' or $1'),
  )}
                 (default: shedlock; MongoDB: shedLock; DynamoDB: Shedlock)`

/** `text` in lines of at most 80 columns after the 17 of the option column, the later ones indented to it. */
function wrapped(text: string): string {
  const lines: string[] = []
  for (const word of text.split(' ')) {
    const last = lines.at(-1)
    if (last !== undefined && 17 + last.length + 1 + word.length <= 80) lines[lines.length - 1] = `${last} ${word}`
    else lines.push(word)
  }
  return lines.join(`\n${' '.repeat(17)}`)
}
