/**
 * The candidate nearest to a mistyped word, for a "did you mean" hint: at most 2 edits away (a
 * swap of two neighbouring letters counts as one), and fewer edits than the candidate's letters
 * (`-x` suggests nothing). Case is ignored: `Doctor` finds `doctor`. The first of equals wins.
 */
export function nearest(typed: string, candidates: readonly string[]): string | undefined {
  let best: { candidate: string; distance: number } | undefined
  for (const candidate of candidates) {
    const distance = editDistance(typed.toLowerCase(), candidate.toLowerCase())
    const letters = candidate.replace(/^-+/, '').length
    if (distance <= 2 && distance < letters && (!best || distance < best.distance)) best = { candidate, distance }
  }
  return best?.candidate
}

/** Levenshtein distance with adjacent transpositions (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  )
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let value = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        value = Math.min(value, d[i - 2]![j - 2]! + 1)
      d[i]![j] = value
    }
  }
  return d[a.length]![b.length]!
}
