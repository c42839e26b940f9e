import type { ServerResponse } from 'node:http'
import { formatDuration, parseDuration } from '../core/duration.ts'
import type { LockInspector } from '../core/lock-inspector.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import { pauseHolder, pauseOf } from '../core/pause.ts'
import { redact } from '../core/redact.ts'
import { messageOf } from '../core/task.ts'
import { endPause, PauseRefused, type PauseTarget, takePause } from '../status/pause-control.ts'
import { escapeHtml, timeHtml } from './escape.ts'
import { send, sendText } from './http.ts'
import { hiddenRecord, type PageInput, query, renderPage } from './page.ts'
import { CONFIRM_SCOPE, CSRF_FAILED, type ReleaseContext } from './release.ts'

// Pause and resume from the dashboard: as `shedlock pause` and `shedlock resume`
// (status/pause-control.ts), each behind a confirmation page whose token is good for that one
// action, with an audit line.

// C0 controls, DEL and C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g

/** The scope of a pause confirmation's token: a pause of this task of this store, nothing else. */
export function pauseScope(store: number, lock: string): string {
  return JSON.stringify(['pause', store, lock])
}

/** The scope of a resume confirmation's token: the end of exactly this pause (holder, time taken). */
export function resumeScope(store: number, lock: string, lockedBy: string, lockedAt: string): string {
  return JSON.stringify(['resume', store, lock, lockedBy, lockedAt])
}

/** What a pause or resume post needs of the handler, besides what a release needs. */
export interface PauseContext extends ReleaseContext {
  /** Per store (by index): its provider holding locks as `lockedBy`, where pausing is on. */
  readonly pausers: readonly (((lockedBy: string) => LockProvider) | undefined)[]
  /** The page to render a confirmation into (no store is read for it), with `csrf` its token. */
  pageInput(csrf: string): PageInput
}

/**
 * Answers the pause and resume forms: `pause-confirm` and `resume-confirm` with a confirmation
 * page, `pause` (with `for` and `reason`) and `resume` by doing it.
 */
export async function answerPause(form: URLSearchParams, response: ServerResponse, ctx: PauseContext): Promise<void> {
  const step = form.get('step') ?? ''
  const index = Number(form.get('store'))
  const name = form.get('lock') ?? ''
  const lockedBy = form.get('lockedBy') ?? ''
  const lockedAt = form.get('lockedAt') ?? ''
  const scope =
    step === 'pause'
      ? pauseScope(index, name)
      : step === 'resume'
        ? resumeScope(index, name, lockedBy, lockedAt)
        : CONFIRM_SCOPE
  if (!ctx.sameOrigin || !ctx.csrf.take(ctx.who, form.get('csrf'), scope)) return sendText(response, 403, CSRF_FAILED)
  const store = Number.isInteger(index) ? ctx.stores[index] : undefined
  const pauser = Number.isInteger(index) ? ctx.pausers[index] : undefined
  if (store === undefined || name === '') return sendText(response, 400, 'shedlock dashboard: the form names no lock\n')
  if (pauser === undefined)
    return sendText(response, 403, 'shedlock dashboard: pausing is off for this store (allowPause, --allow-pause)\n')
  const label = redact(store.label)
  const html = (body: string): void => send(response, 200, 'text/html; charset=utf-8', body, ctx.nonce)
  const current = await store.inspector.get(name)
  if (step === 'pause-confirm') {
    if (current?.held) return html(await ctx.page(heldNotice(name, current.lockedBy)))
    return html(renderPauseConfirm(ctx.pageInput(ctx.csrf.issue(ctx.who, pauseScope(index, name))), label, name, index))
  }
  if (step === 'resume-confirm') {
    const pause = pauseOf(current)
    if (!pause) return html(await ctx.page(`Task "${name}" is not paused (any more): nothing to resume.`))
    const token = ctx.csrf.issue(
      ctx.who,
      resumeScope(index, name, current!.lockedBy ?? '', current!.lockedAt?.toISOString() ?? ''),
    )
    const body = `<h2>Resume task “${escapeHtml(name)}”?</h2>
<p>Paused by <strong>${escapeHtml(pause.by)}</strong>${pause.reason ? ` (${escapeHtml(pause.reason)})` : ''} until ${timeHtml(pause.until)}, in ${escapeHtml(label)}.</p>
<p>The task runs again at its next fire time; those that passed during the pause are not run.</p>
${confirmForm(ctx.pageInput(token), hiddenRecord(current!, index, token), 'resume', 'Resume now')}`
    return html(renderPage({ ...ctx.pageInput(token), refreshSeconds: 0 }, body))
  }
  if (step === 'pause')
    return html(await ctx.page(await pause(form, ctx, { inspector: store.inspector, provider: pauser }, name, label)))
  if (step === 'resume') {
    // Only the pause the confirmation showed: a pause taken since by someone else stays.
    const same = current !== undefined && current.lockedBy === lockedBy && current.lockedAt?.toISOString() === lockedAt
    if (!same || !pauseOf(current))
      return html(await ctx.page(`Task "${name}" changed since the page showed it: nothing was resumed. Look again.`))
    return html(await ctx.page(await resume(ctx, store.inspector, name, label)))
  }
  return sendText(response, 400, `shedlock dashboard: unknown step ${JSON.stringify(step)}; use the page's buttons\n`)
}

async function pause(
  form: URLSearchParams,
  ctx: PauseContext,
  target: PauseTarget,
  name: string,
  label: string,
): Promise<string> {
  const forText = (form.get('for') ?? '').trim()
  // Control characters would forge lines of the audit log (and of `history` in a terminal).
  const reason = (form.get('reason') ?? '').replace(CONTROL, ' ').trim() || undefined
  let forMs: number | undefined
  try {
    forMs = forText === '' ? undefined : parseDuration(forText)
  } catch {
    return `Could not read "${forText}" as a duration (90s, 30m, 8h, 7d or PT8H): task "${name}" was not paused.`
  }
  try {
    const { result, pause } = await takePause(target, name, pauseHolder(ctx.who, reason), forMs)
    if (result === 'already-paused') return `Task "${name}" is already paused by ${pause.by}: left as it is.`
    const span = forMs === undefined ? 'until resumed' : `for ${formatDuration(forMs)}`
    ctx.audit(
      `shedlock dashboard: ${new Date().toISOString()} ${ctx.who} paused task ${JSON.stringify(name)} of ${label} ${span}${reason ? ` (${reason})` : ''}`,
    )
    return `Paused task "${name}" ${span}: every node skips it until then.`
  } catch (error) {
    if (error instanceof PauseRefused)
      return error.why === 'held-by-run' ? heldNotice(name, error.record?.lockedBy) : `${error.message}.`
    // A duration the store cannot hold, a store that cannot hold a pause (NATS, ZooKeeper,
    // memcached), a store that failed: said on the page, as the command says it.
    return `Task "${name}" was not paused: ${redact(messageOf(error))}`
  }
}

async function resume(ctx: PauseContext, inspector: LockInspector, name: string, label: string): Promise<string> {
  try {
    const { result, pause } = await endPause(inspector, name)
    if (result === 'not-paused') return `Task "${name}" is not paused: nothing to resume.`
    ctx.audit(
      `shedlock dashboard: ${new Date().toISOString()} ${ctx.who} resumed task ${JSON.stringify(name)} of ${label} (paused by ${JSON.stringify(pause!.by).slice(1, -1)})`,
    )
    return `Resumed task "${name}" (was paused by ${pause!.by}).`
  } catch (error) {
    if (error instanceof PauseRefused) return `Task "${name}" changed meanwhile: nothing was resumed.`
    return `Task "${name}" was not resumed: ${redact(messageOf(error))}`
  }
}

function heldNotice(name: string, lockedBy: string | undefined): string {
  return `Task "${name}" is running (its lock is held by ${lockedBy ?? 'another node'}): a pause never cuts a run short. Try again once it has ended.`
}

/** The confirmation page of a pause: how long, and why. */
function renderPauseConfirm(input: PageInput, label: string, name: string, store: number): string {
  const field = (n: string, v: string): string => `<input type="hidden" name="${n}" value="${escapeHtml(v)}">`
  const hidden = field('csrf', input.csrf!) + field('store', String(store)) + field('lock', name)
  const body = `<h2>Pause task “${escapeHtml(name)}”?</h2>
<p>Every node (Java ShedLock's too) skips the task while it is paused, in ${escapeHtml(label)}. Fire times that pass during the pause are not run afterwards: a pause is not an outage.</p>
<form method="post" action="${query({ window: input.window, q: input.filter })}" class="pause">${hidden}<input type="hidden" name="step" value="pause">
<p><label for="pause-for">For</label> <input id="pause-for" name="for" placeholder="until resumed" size="12"> <span class="muted">90s, 30m, 8h, 7d; empty: until resumed</span></p>
<p><label for="pause-reason">Reason</label> <input id="pause-reason" name="reason" maxlength="150" size="40"></p>
<button type="submit" class="danger" autofocus>Pause now</button> <a href="${query({ window: input.window, q: input.filter })}">Cancel</a></form>`
  return renderPage({ ...input, refreshSeconds: 0 }, body)
}

function confirmForm(input: PageInput, hidden: string, step: string, label: string): string {
  return `<form method="post" action="${query({ window: input.window, q: input.filter })}">${hidden}<input type="hidden" name="step" value="${step}">
<button type="submit" class="danger" autofocus>${label}</button> <a href="${query({ window: input.window, q: input.filter })}">Cancel</a></form>`
}
