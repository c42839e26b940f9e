// Runs one example: npm run example <name>   (npm run example lists them)
// Builds what the example imports if it is not built yet (the shedlock package, and
// @shedlock/nestjs for the NestJS one), compiles the examples with tsc, then runs the example.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const here = fileURLToPath(new URL('.', import.meta.url))
const names = readdirSync(here)
  .filter((file) => file.endsWith('.ts'))
  .map((file) => file.slice(0, -3))
const name = process.argv[2]?.replace(/\.ts$/, '')

if (!name || !names.includes(name)) {
  console.error(`usage: npm run example <name>\nexamples: ${names.join(', ')}`)
  process.exit(1)
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const step = (command, args) => {
  const { status } = spawnSync(command, args, { cwd: root, stdio: 'inherit' })
  if (status !== 0) process.exit(status ?? 1)
}
if (!existsSync(`${root}dist/index.js`)) step(npm, ['run', 'build'])
if (name.startsWith('nestjs') && !existsSync(`${root}packages/nestjs/dist/index.js`))
  step(npm, ['run', 'build', '-w', '@shedlock/nestjs'])
step(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-p', `${here}tsconfig.json`])

// Ctrl+C reaches the example too; wait for it to stop.
process.on('SIGINT', () => {})
process.on('SIGTERM', () => {})
const child = spawn(process.execPath, ['--enable-source-maps', `${here}dist/${name}.js`], { stdio: 'inherit' })
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
