// `node scripts/pack-manifest.mjs clean` (prepack) / `restore` (postpack), run from a package's
// folder: the tarball's package.json carries only what a consumer uses. Dropped: what only this
// repository uses (`workspaces`, `overrides`, `allowScripts`, `devDependencies`, `scripts`).
// `clean` keeps the original in node_modules/.cache (not in the tarball, not in git) and refuses
// to run while one is kept, so an interrupted pack never loses it: `restore` puts it back, and
// does nothing when nothing is kept.
//
// npm publish reads package.json again after postpack for the registry's copy of the metadata,
// which therefore still lists those fields; what is installed into node_modules is the tarball's.
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const DROPPED = ['workspaces', 'overrides', 'allowScripts', 'devDependencies', 'scripts']
const manifest = join(process.cwd(), 'package.json')
const kept = join(process.cwd(), 'node_modules', '.cache', 'shedlock-pack', 'package.json')

const action = process.argv[2]
if (action === 'clean') {
  if (existsSync(kept)) {
    console.error(
      `pack-manifest: ${kept} is kept from a pack that did not finish: run "node scripts/pack-manifest.mjs restore" first`,
    )
    process.exit(1)
  }
  mkdirSync(join(kept, '..'), { recursive: true })
  copyFileSync(manifest, kept)
  const pkg = JSON.parse(readFileSync(manifest, 'utf8'))
  for (const field of DROPPED) delete pkg[field]
  writeFileSync(manifest, `${JSON.stringify(pkg, null, 2)}\n`)
} else if (action === 'restore') {
  if (existsSync(kept)) {
    copyFileSync(kept, manifest)
    rmSync(kept)
  }
} else {
  console.error('usage: node scripts/pack-manifest.mjs clean|restore')
  process.exit(2)
}
