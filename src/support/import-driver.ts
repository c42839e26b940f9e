import { CliError } from './admin-errors.ts'

/**
 * Imports a store's driver package, which is not a dependency of shedlock: the user installs it
 * next to shedlock (as for the providers, which take the user's own client).
 *
 * @throws CliError naming the package to install when it cannot be found; any other failure
 *   (a broken install, a native module built for another Node) keeps its message.
 */
export async function importDriver<T>(specifier: string, install: string, store: string): Promise<T> {
  try {
    // A variable specifier: TypeScript and bundlers leave it alone, and nothing loads before this call.
    const name = specifier
    return (await import(name)) as T
  } catch (error) {
    if (isNotFound(error, specifier)) {
      throw new CliError(`${store} URLs need the ${install.split(' ')[0]} package, which is not installed: run npm install ${install}`, { cause: error })
    }
    throw new CliError(`cannot load ${specifier} for ${store} URLs (${error instanceof Error ? error.message.split('\n')[0] : String(error)}); reinstall it: npm install ${install}`, {
      cause: error,
    })
  }
}

/** True when `error` says that the package of `specifier` itself (not one of its own imports) was not found. */
export function isNotFound(error: unknown, specifier: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false
  // Node names the package, not the subpath: "Cannot find package 'mysql2' imported from ...".
  const parts = specifier.split('/')
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
  return typeof message === 'string' && [specifier, name].some((s) => message.includes(`'${s}'`) || message.includes(`"${s}"`))
}
