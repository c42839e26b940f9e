import type { ServerResponse } from 'node:http'
import type { LockProvider } from '../core/lock-provider.ts'
import { redact } from '../core/redact.ts'
import { escapeHtml } from './escape.ts'
import { send, sendText } from './http.ts'
import { type PageInput, query, renderPage } from './page.ts'
import { CSRF_FAILED, type ReleaseContext } from './release.ts'

// What the operator's forms (pause, resume, trigger) share: each post's single-use token checked
// against the scope of what its step does, the store and task it names, the switch that allows
// the action on that store; and the confirmation page with its one form.

/** Per store (by index): its provider holding locks as `lockedBy`, where the action is on. */
export type OperatorProviders = readonly (((lockedBy: string) => LockProvider) | undefined)[]

/** What an operator post needs of the handler, besides what a release needs. */
export interface OperatorContext extends ReleaseContext {
  /** The page to render a confirmation into (no store is read for it), with `csrf` its token. */
  pageInput(csrf: string): PageInput
}

/** A post that passed {@link checkOperatorPost}: which step, on which task of which store. */
export interface OperatorPost {
  readonly step: string
  /** The store's index in the dashboard's stores. */
  readonly index: number
  /** The task's lock name. */
  readonly name: string
  readonly store: ReleaseContext['stores'][number]
  readonly provider: (lockedBy: string) => LockProvider
  /** The store's label, its password masked. */
  readonly label: string
  /** Answers the post with a page. */
  html(body: string): void
}

/** How {@link checkOperatorPost} checks the posts of one action. */
export interface OperatorAction {
  /** The token scope a post of `step` must carry: what exactly that step acts on. */
  scope(step: string, index: number, name: string, form: URLSearchParams): string
  readonly providers: OperatorProviders
  /** The 403 message when the store's action is off, naming the option. */
  readonly off: string
}

/**
 * Checks a post of an operator form: its token (good once) against the step's scope, the store
 * and task it names, the action allowed on that store. Answers 403 or 400 and returns
 * `undefined` when one fails.
 */
export function checkOperatorPost(
  form: URLSearchParams,
  response: ServerResponse,
  ctx: OperatorContext,
  action: OperatorAction,
): OperatorPost | undefined {
  const step = form.get('step') ?? ''
  const index = Number(form.get('store'))
  const name = form.get('lock') ?? ''
  if (!ctx.sameOrigin || !ctx.csrf.take(ctx.who, form.get('csrf'), action.scope(step, index, name, form))) {
    sendText(response, 403, CSRF_FAILED)
    return undefined
  }
  const store = Number.isInteger(index) ? ctx.stores[index] : undefined
  const provider = Number.isInteger(index) ? action.providers[index] : undefined
  if (store === undefined || name === '') {
    sendText(response, 400, 'shedlock dashboard: the form names no lock\n')
    return undefined
  }
  if (provider === undefined) {
    sendText(response, 403, `shedlock dashboard: ${action.off}\n`)
    return undefined
  }
  const html = (body: string): void => send(response, 200, 'text/html; charset=utf-8', body, ctx.nonce)
  return { step, index, name, store, provider, label: redact(store.label), html }
}

/** Answers a step that no form of the page posts. */
export function unknownStep(response: ServerResponse, step: string): void {
  sendText(response, 400, `shedlock dashboard: unknown step ${JSON.stringify(step)}; use the page's buttons\n`)
}

/** What a confirmation page shows and posts. */
export interface Confirmation {
  /** The question, as text. */
  readonly title: string
  /** What confirming does, as HTML. */
  readonly about: string
  /** The hidden fields that name what is confirmed, the token included. */
  readonly hidden: string
  /** The step the form posts. */
  readonly step: string
  readonly button: string
  /** Inputs shown above the button, as HTML. */
  readonly fields?: string
  readonly className?: string
}

/** A confirmation page: the question, what it does, and one form that posts the step, or Cancel. */
export function renderConfirmation(input: PageInput, c: Confirmation): string {
  const back = query({ window: input.window, q: input.filter })
  const body = `<h2>${escapeHtml(c.title)}</h2>
${c.about}
<form method="post" action="${back}"${c.className ? ` class="${c.className}"` : ''}>${c.hidden}<input type="hidden" name="step" value="${c.step}">
${c.fields ?? ''}<button type="submit" class="danger" autofocus>${c.button}</button> <a href="${back}">Cancel</a></form>`
  return renderPage({ ...input, refreshSeconds: 0 }, body)
}

/** The hidden fields of a confirmation that names a task, not an acquisition of it. */
export function hiddenTask(csrf: string, index: number, name: string): string {
  const field = (n: string, v: string): string => `<input type="hidden" name="${n}" value="${escapeHtml(v)}">`
  return field('csrf', csrf) + field('store', String(index)) + field('lock', name)
}
