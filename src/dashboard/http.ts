import type { IncomingMessage, ServerResponse } from 'node:http'

/** Sends a whole answer with the dashboard's headers (no caching, no sniffing, its CSP with `nonce`). */
export function send(response: ServerResponse, status: number, type: string, body: string, nonce?: string): void {
  response.statusCode = status
  response.setHeader('content-type', type)
  response.setHeader('cache-control', 'no-store')
  response.setHeader('x-content-type-options', 'nosniff')
  // Not no-referrer: with it, a browser sends `Origin: null` with the form posts, which the CSRF check refuses.
  response.setHeader('referrer-policy', 'same-origin')
  response.setHeader(
    'content-security-policy',
    `default-src 'none'; ${nonce ? `style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; ` : ''}img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
  )
  response.end(body)
}

/** A plain-text answer: what went wrong and what to do. */
export function sendText(response: ServerResponse, status: number, text: string): void {
  send(response, status, 'text/plain; charset=utf-8', text)
}

/** 405 with the methods allowed. */
export function methodNotAllowed(response: ServerResponse, allow: string): void {
  response.setHeader('allow', allow)
  sendText(response, 405, `shedlock dashboard: use ${allow}\n`)
}

/** The largest form post read, in bytes: 16 KiB (a release form is well under 1 KiB). */
export const MAX_FORM_BYTES = 16_384

/** A form post larger than {@link MAX_FORM_BYTES}: answered 413. */
export class FormTooLargeError extends Error {
  override name = 'FormTooLargeError'
}

/**
 * The url-encoded body of a form post, at most {@link MAX_FORM_BYTES}. A framework may have parsed
 * it already (`request.body`; a repeated field as an array).
 * @throws FormTooLargeError for a larger body, from its Content-Length before reading any of it.
 */
export async function readForm(request: IncomingMessage): Promise<URLSearchParams> {
  const parsed = (request as IncomingMessage & { body?: unknown }).body
  if (parsed !== undefined && parsed !== null && typeof parsed === 'object' && !Buffer.isBuffer(parsed)) {
    const form = new URLSearchParams()
    for (const [key, value] of Object.entries(parsed as Record<string, unknown>))
      for (const one of Array.isArray(value) ? value : [value]) form.append(key, String(one))
    return form
  }
  if (typeof parsed === 'string') return new URLSearchParams(parsed)
  const tooLarge = new FormTooLargeError(
    `shedlock dashboard: the form is larger than ${MAX_FORM_BYTES / 1024} KiB; a release form is far smaller: reload the page and use its buttons\n`,
  )
  if (Number(request.headers['content-length'] ?? 0) > MAX_FORM_BYTES) throw tooLarge
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of request) {
    size += (chunk as Buffer).length
    if (size > MAX_FORM_BYTES) throw tooLarge
    chunks.push(chunk as Buffer)
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
}
