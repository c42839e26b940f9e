#!/usr/bin/env node
// Adds package-lock.json entries for the optional per-platform packages (Biome's and Deno's
// binaries for other OSes and CPUs) that a registry serving only this platform's packages leaves
// out, so that `npm ci` finds every dependency in the lock; npm skips them by their os/cpu/libc.
// Run it after `npm install` changes the lock: `node scripts/lock-platforms.mjs`.
import { readFileSync, writeFileSync } from 'node:fs'
const file = process.argv[2] ?? 'package-lock.json'
const lock = JSON.parse(readFileSync(file, 'utf8'))
const pk = lock.packages
const platform = (name) => {
  const os = ['android', 'darwin', 'linux', 'win32', 'freebsd', 'openbsd', 'sunos', 'netbsd', 'aix'].find((o) =>
    new RegExp(`(^|[-/])${o}([-]|$)`).test(name.split('/').pop()),
  )
  const cpu = ['arm64', 'x64', 'ia32', 'arm', 'ppc64', 's390x', 'riscv64', 'loong64', 'mips64el'].find((c) =>
    new RegExp(`(^|-)${c}(-|$)`).test(name.split('/').pop()),
  )
  const libc = /musl/.test(name) ? 'musl' : /gnu|glibc/.test(name) ? 'glibc' : undefined
  return { os, cpu, libc }
}
let added = 0
for (const [path, entry] of Object.entries(pk)) {
  for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
    // Resolved from `path` upwards, as Node does.
    const base = path === '' ? '' : `${path}/`
    const candidates = [`${base}node_modules/${dep}`]
    let p = path
    while (p.includes('node_modules/')) {
      p = p.slice(0, p.lastIndexOf('/node_modules/'))
      candidates.push(`${p ? `${p}/` : ''}node_modules/${dep}`)
    }
    candidates.push(`node_modules/${dep}`)
    if (candidates.some((c) => pk[c])) continue
    const { os, cpu, libc } = platform(dep)
    if (!os || (os === 'linux' && cpu === 'x64' && libc !== 'musl')) {
      console.error(`left alone: ${dep}@${version} (from ${path})`)
      continue
    }
    pk[`node_modules/${dep}`] = {
      version,
      ...(entry.dev ? { dev: true } : {}),
      optional: true,
      os: [os],
      ...(cpu ? { cpu: [cpu] } : {}),
      ...(libc ? { libc: [libc] } : {}),
    }
    added++
  }
}
lock.packages = Object.fromEntries(
  Object.entries(pk).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))),
)
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`)
console.log(`added ${added} entries`)
