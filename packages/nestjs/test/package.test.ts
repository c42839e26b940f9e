import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import * as nestjs from '../src/index.ts'

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  name: string
  type?: string
  dependencies?: Record<string, string>
  peerDependencies?: Record<string, string>
  devDependencies?: Record<string, string>
  exports: Record<string, unknown>
}

describe('@shedlock/nestjs package.json', () => {
  it('is an ES module package that peers on NestJS and shedlock and depends on nothing', () => {
    expect(pkg.name).toBe('@shedlock/nestjs')
    expect(pkg.type).toBe('module')
    expect(pkg.dependencies ?? {}).toEqual({})
    // shedlock must be a peer: a copy of its own would split the lock context and the configuration.
    expect(Object.keys(pkg.peerDependencies ?? {}).sort()).toEqual(['@nestjs/common', '@nestjs/core', 'shedlock'])
    // The dev dependency only links the repository's own shedlock into node_modules for the workspace.
    expect(pkg.devDependencies).toEqual({ shedlock: 'file:../..' })
  })

  it('exports the module, the decorator, the service and the tokens', () => {
    expect(pkg.exports['.']).toEqual({ types: './dist/index.d.ts', default: './dist/index.js' })
    expect(Object.keys(nestjs).sort()).toEqual([
      'SCHEDULER_LOCK_OPTIONS',
      'SHEDLOCK_EXECUTOR',
      'SHEDLOCK_MODULE_OPTIONS',
      'SchedulerLock',
      'ShedLockModule',
      'ShedLockService',
    ])
  })
})
