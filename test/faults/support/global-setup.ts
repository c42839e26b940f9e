import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestProject } from 'vitest/node'
import type { Figure } from './figures.ts'

/**
 * Gives the fault tests a file to record their figures in and, after the run, prints one summary
 * line: faults injected per store, hostile inputs tried, executions checked in the soak,
 * overlaps found.
 */
export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'shedlock-faults-figures-'))
  const file = join(dir, 'figures.jsonl')
  project.provide('faultFiguresFile', file)
  return () => {
    let figures: Figure[] = []
    try {
      figures = readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Figure)
    } catch {
      // No test recorded anything (a filtered run).
    }
    rmSync(dir, { recursive: true, force: true })
    if (figures.length === 0) return
    const faults = new Map<string, number>()
    let inputs = 0
    let executions = 0
    let overlaps = 0
    for (const f of figures) {
      // "postgres (app time)" counts for postgres.
      const store = f.store.split(' ')[0]!
      if (f.faults > 0) faults.set(store, (faults.get(store) ?? 0) + f.faults)
      inputs += f.inputs ?? 0
      executions += f.executions ?? 0
      overlaps += f.overlaps ?? 0
    }
    const perStore = [...faults].map(([store, n]) => `${store} ${n}`).join(', ') || 'none'
    console.log(
      `\nshedlock fault suite: faults injected per store: ${perStore}; hostile inputs tried: ${inputs}; soak executions checked: ${executions}; overlaps found: ${overlaps}\n`,
    )
    const slots = figures.filter((f) => f.slots)
    if (slots.length > 0) {
      console.log('slot proofs (docs/slots.md): store, proof, mode: slots, runs per node, duplicates, missing')
      for (const f of slots) {
        const s = f.slots!
        const perNode = Object.entries(s.runsPerNode)
          .map(([node, runs]) => `${node} ${runs}`)
          .join(', ')
        console.log(
          `  ${f.store}, ${f.group}, ${s.mode}: ${s.slots} slots, runs per node ${perNode}; ${s.duplicates} duplicates, ${s.missing} missing`,
        )
      }
      console.log('')
    }
  }
}
