import type { ServerResponse } from 'node:http'
import type { LockRecord } from '../core/lock-inspector.ts'
import { redact } from '../core/redact.ts'
import type { CsrfTokens } from './auth.ts'
import { send, sendText } from './http.ts'
import type { DashboardStore } from './snapshot.ts'

/** The scope of the tokens of the main page's forms: they ask for a confirmation page, nothing more. */
export const CONFIRM_SCOPE = 'confirm'

/**
 * The scope of the token of a confirmation page: the release of exactly this acquisition (holder,
 * time taken) of this lock of this store, so that a hand-made form with that token can release
 * nothing else.
 */
export function releaseScope(store: number, lock: string, lockedBy: string, lockedAt: string): string {
  return JSON.stringify(['release', store, lock, lockedBy, lockedAt])
}

/** What a release post needs of the handler. */
export interface ReleaseContext {
  readonly stores: readonly DashboardStore[]
  readonly csrf: CsrfTokens
  /** Who posts, as `authenticate()` names them. */
  readonly who: string
  /** Whether the post came from the dashboard's own page (its Origin or Referer). */
  readonly sameOrigin: boolean
  readonly audit: (line: string) => void
  readonly nonce: string
  /** The main page from the stores as they are now, with `notice` on top. */
  page(notice: string): Promise<string>
  /** The confirmation page of the release of `lock` (as just read) of store `store`. */
  confirm(store: number, lock: LockRecord): Promise<string>
}

/** The message of a form whose CSRF check failed. */
export const CSRF_FAILED =
  'shedlock dashboard: the form is stale, was used already or came from another site (CSRF check failed: a form is good once, for 5 minutes); reload the page and try again\n'

/**
 * Answers a release form: its first step (`step=confirm`) with the confirmation page, its second
 * (`step=release`) by releasing the lock, if it is still in the state the page showed.
 */
export async function answerRelease(
  form: URLSearchParams,
  response: ServerResponse,
  ctx: ReleaseContext,
): Promise<void> {
  const index = Number(form.get('store'))
  const name = form.get('lock') ?? ''
  const lockedBy = form.get('lockedBy') ?? ''
  const lockedAt = form.get('lockedAt') ?? ''
  const step = form.get('step') === 'release' ? 'release' : 'confirm'
  const scope = step === 'release' ? releaseScope(index, name, lockedBy, lockedAt) : CONFIRM_SCOPE
  if (!ctx.sameOrigin || !ctx.csrf.take(ctx.who, form.get('csrf'), scope)) return sendText(response, 403, CSRF_FAILED)
  const store = Number.isInteger(index) ? ctx.stores[index] : undefined
  if (store === undefined || name === '') return sendText(response, 400, 'shedlock dashboard: the form names no lock\n')
  const current = await store.inspector.get(name)
  // The same acquisition: its holder's lease renewals since the page (which move lockUntil)
  // do not stop the release; another acquisition does.
  const unchanged =
    current?.held === true &&
    (current.lockedBy ?? '') === lockedBy &&
    (current.lockedAt?.toISOString() ?? '') === lockedAt
  let notice: string
  if (!unchanged || current === undefined)
    notice = `Lock "${name}" changed since the page showed it (or is no longer held): nothing was released. Look again.`
  else if (step === 'confirm')
    return send(response, 200, 'text/html; charset=utf-8', await ctx.confirm(index, current), ctx.nonce)
  else {
    // Only the acquisition read just now is released: if another node took the lock since,
    // release(record) changes nothing, and the old holder's late release cannot free the new
    // holder either (the inspector's guarantee).
    const released = await store.inspector.release(current)
    ctx.audit(
      `shedlock dashboard: ${new Date().toISOString()} ${ctx.who} ${released ? 'released' : 'tried to release'} lock "${name}" of ${redact(store.label)} (held by ${current.lockedBy ?? 'unknown'} until ${current.lockUntil?.toISOString() ?? 'unknown'})${released ? '' : ': it had changed, nothing released'}`,
    )
    notice = released
      ? `Released lock "${name}" (held by ${current.lockedBy ?? 'unknown'}).`
      : `Lock "${name}" changed meanwhile: nothing was released.`
  }
  send(response, 200, 'text/html; charset=utf-8', await ctx.page(notice), ctx.nonce)
}
