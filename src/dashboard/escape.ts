const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

/** `text` safe inside HTML text and double- or single-quoted attributes (and SVG). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!)
}

/** A store time as the page shows it: `2026-11-27 09:16:54Z` (UTC, seconds). */
export function timeText(time: Date): string {
  return `${time.toISOString().slice(0, 19).replace('T', ' ')}Z`
}

/** A `<time>` element: store time as text, ISO in `datetime`; the page's script puts the reader's local time in its tooltip. */
export function timeHtml(time: Date | undefined): string {
  if (time === undefined) return '<span class="muted">-</span>'
  return `<time datetime="${time.toISOString()}" title="UTC">${timeText(time)}</time>`
}
