import { ShedLockError } from '../core/errors.ts'
import type { StoreEntry } from '../providers/registry.ts'
import { CliError, UsageError } from '../support/admin-errors.ts'
import type { StoreAdmin, StoreOptions } from '../support/store-admin.ts'
import type { StoreUrl } from '../support/store-url.ts'

/** A parsed `--url` with its store's registry entry. */
export type ResolvedStoreUrl = StoreUrl & { readonly store: StoreEntry }

/**
 * Opens the store named by `url` through the registry, loading only that store's module and driver.
 * @throws UsageError for options the store does not take; CliError when it cannot connect.
 */
export async function openStore(url: ResolvedStoreUrl, options: StoreOptions = {}): Promise<StoreAdmin> {
  const { store } = url
  if (options.table !== undefined && !store.table) {
    throw new UsageError(
      `--table does not apply to ${store.id} URLs, which keep no table; ${store.insteadOfTable ?? 'see shedlock --help'}`,
    )
  }
  if (options.fencingTokens && store.table?.what !== 'SQL table') {
    throw new UsageError(
      `--fencing-tokens applies to SQL stores (a column of the lock table); ${store.id} needs nothing created for them`,
    )
  }
  return (await store.load()).open(url, options)
}

/**
 * Runs `fn` with an open store and closes it afterwards, whatever happens. A driver error from
 * `fn` becomes a CliError that names the store.
 */
export async function withStore<T>(
  url: ResolvedStoreUrl,
  options: StoreOptions,
  fn: (store: StoreAdmin) => Promise<T>,
): Promise<T> {
  const store = await openStore(url, options)
  try {
    return await fn(store)
  } catch (error) {
    if (error instanceof CliError || error instanceof UsageError || error instanceof ShedLockError) throw error
    throw new CliError(
      `${store.kind} ${store.where} failed: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    )
  } finally {
    await store.close().catch(() => {})
  }
}
