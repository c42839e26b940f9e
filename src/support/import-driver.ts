import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { CliError } from './admin-errors.ts'

/** Where a driver was looked for, in order. */
interface Place {
  /** A file in the folder to resolve from (createRequire wants a file). */
  from: string
  label: string
}

/**
 * The folders a driver is resolved from: the user's project (the current directory, where
 * `npm install pg` puts it) first, then shedlock's own location (a global install, or a driver
 * installed next to shedlock).
 */
function placesToLook(): Place[] {
  const project = process.cwd()
  const own = fileURLToPath(new URL('.', import.meta.url))
  return [
    { from: join(project, 'package.json'), label: `${project} (the current directory)` },
    { from: join(own, 'import-driver.js'), label: `${own} (shedlock's own folder)` },
  ]
}

/**
 * Imports a store's driver package, which is not a dependency of shedlock: the user installs it
 * in their project. It is resolved from the current directory first, then from shedlock's own
 * location (`import()` alone would look only there: a driver installed in the project next to a
 * global or `npx` shedlock would not be found).
 *
 * Resolves to the module namespace, with the properties of a CommonJS module's `default`
 * (its `module.exports`) also readable by name, as Node's ESM interop gives most of them.
 *
 * @throws CliError naming the package to install and where it was looked for when it cannot be
 *   found; any other failure (a broken install, a native module built for another Node) keeps
 *   its message.
 */
export async function importDriver<T>(specifier: string, install: string, store: string): Promise<T> {
  const places = placesToLook()
  let resolved: string | undefined
  let notFound: unknown
  for (const place of places) {
    try {
      resolved = createRequire(place.from).resolve(specifier)
      break
    } catch (error) {
      if (!isNotFound(error, specifier)) throw loadError(specifier, install, store, error)
      notFound = error
    }
  }
  if (resolved === undefined) {
    throw new CliError(
      `${store} URLs need the ${install.split(' ')[0]} package, which is not installed: ${lookedFrom()}; run npm install ${install} in your project`,
      {
        cause: notFound,
      },
    )
  }
  try {
    const namespace = (await import(pathToFileURL(resolved).href)) as Record<string, unknown>
    const main = namespace.default
    return (typeof main === 'object' || typeof main === 'function') && main !== null
      ? ({ ...main, ...namespace } as T)
      : (namespace as T)
  } catch (error) {
    throw loadError(specifier, install, store, error)
  }
}

/** Where {@link importDriver} looks for drivers, for messages: `looked from DIR (the current directory), then from DIR (shedlock's own folder)`. */
export function lookedFrom(): string {
  return `looked from ${placesToLook()
    .map((p) => p.label)
    .join(', then from ')}`
}

function loadError(specifier: string, install: string, store: string, error: unknown): CliError {
  return new CliError(
    `cannot load ${specifier} for ${store} URLs (${error instanceof Error ? error.message.split('\n')[0] : String(error)}); reinstall it: npm install ${install}`,
    {
      cause: error,
    },
  )
}

/** True when `error` says that the package of `specifier` itself (not one of its own imports) was not found. */
export function isNotFound(error: unknown, specifier: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false
  // Node names the package, not the subpath: "Cannot find package 'mysql2' imported from ...".
  const parts = specifier.split('/')
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
  return (
    typeof message === 'string' &&
    [specifier, name].some((s) => message.includes(`'${s}'`) || message.includes(`"${s}"`))
  )
}
