import { spawn } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../../', import.meta.url))
const nestjs = join(root, 'packages/nestjs')

/** Runs the repository's tsc on `project`; resolves to its exit code and output. */
export function tsc(project: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', project], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('close', (code) => resolve({ code, output }))
  })
}

/** True when `dist` has no index.js or is older than a file of `src`. */
function isStale(src: string, dist: string): boolean {
  if (!existsSync(join(dist, 'index.js'))) return true
  const times = (dir: string) => readdirSync(dir).map((file) => statSync(join(dir, file)).mtimeMs)
  return Math.max(...times(src)) > Math.min(...times(dist))
}

/**
 * Builds @shedlock/nestjs into packages/nestjs/dist with tsc, unless that build is up to date
 * (`npm test` builds it first, and other test files read it meanwhile). Needs the built root
 * package, whose types it imports.
 */
export async function ensureNestjsBuilt(): Promise<void> {
  if (!existsSync(join(root, 'dist/index.d.ts')))
    throw new Error('dist/ of shedlock is missing: run "npm run build" at the repository root first')
  if (!isStale(join(nestjs, 'src'), join(nestjs, 'dist'))) return
  const { code, output } = await tsc(join(nestjs, 'tsconfig.build.json'))
  if (code !== 0) throw new Error(`building @shedlock/nestjs failed:\n${output}`)
}
