// Lock names, holders, node names and error messages come from the store, where any writer can put
// anything: printed as they are, an escape sequence among them would retitle the terminal
// (`\x1b]0;…\x07`), clear it (`\x1b[2J`), move the cursor over other lines or forge whole lines
// of output, and a bidirectional control would show text in another order than it is.

// C0 controls, DEL, C1 controls, the Unicode line and paragraph separators, and the
// bidirectional marks, embeddings, overrides and isolates.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g
// The same but line feeds and tabs: the layout of whole lines of output.
const CONTROL_BUT_LAYOUT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g

function visible(c: string): string {
  if (c === '\n') return '\\n'
  if (c === '\r') return '\\r'
  if (c === '\t') return '\\t'
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`
}

/**
 * `text` with every control character (see {@link inertOutput}) and every line break and tab
 * written as a visible escape: `\n`, `\r`, `\t`, else `\u` and 4 hex digits (`\u001b` for ESC). A
 * field of a table or a line (a node name, an error message) stays one inert line. A backslash is
 * left as it is: `\u001b` in the output may also have been those 6 characters in the store.
 */
export function inert(text: string): string {
  return text.replace(CONTROL, visible)
}

/**
 * What the CLI writes, with every control character but line feeds and tabs written as a visible
 * escape (`\r`, `\u001b`, `\u009b`, `\u202e`): C0 and C1 controls, DEL, the Unicode line
 * separators and the bidirectional controls. In a JSON document (where JSON has already escaped
 * C0 controls) an escape left by this is a valid JSON escape of the same character.
 */
export function inertOutput(text: string): string {
  return text.replace(CONTROL_BUT_LAYOUT, visible)
}
