import type { ServerResponse } from 'node:http'
import { formatDuration, parseDuration } from '../core/duration.ts'
import type { LockInspector } from '../core/lock-inspector.ts'
import { pauseHolder, pauseOf } from '../core/pause.ts'
import { redact } from '../core/redact.ts'
import { messageOf } from '../core/task.ts'
import { endPause, PauseRefused, type PauseTarget, takePause } from '../status/pause-control.ts'
import { escapeHtml, timeHtml } from './escape.ts'
import {
  checkOperatorPost,
  hiddenTask,
  type OperatorContext,
  type OperatorProviders,
  renderConfirmation,
  unknownStep,
} from './operator-action.ts'
import { hiddenRecord } from './page.ts'
import { CONFIRM_SCOPE } from './release.ts'

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
export interface PauseContext extends OperatorContext {
  /** Per store (by index): its provider holding locks as `lockedBy`, where pausing is on. */
  readonly pausers: OperatorProviders
}

// The token scope of each step: a confirmation's, a pause of the task, the end of one pause.
function scopeOf(step: string, index: number, name: string, form: URLSearchParams): string {
  if (step === 'pause') return pauseScope(index, name)
  if (step === 'resume') return resumeScope(index, name, form.get('lockedBy') ?? '', form.get('lockedAt') ?? '')
  return CONFIRM_SCOPE
}

/**
 * Answers the pause and resume forms: `pause-confirm` and `resume-confirm` with a confirmation
 * page, `pause` (with `for` and `reason`) and `resume` by doing it.
 */
export async function answerPause(form: URLSearchParams, response: ServerResponse, ctx: PauseContext): Promise<void> {
  const post = checkOperatorPost(form, response, ctx, {
    scope: scopeOf,
    providers: ctx.pausers,
    off: 'pausing is off for this store (allowPause, --allow-pause)',
  })
  if (post === undefined) return
  const { step, index, name, store, label, html } = post
  const current = await store.inspector.get(name)
  if (step === 'pause-confirm') {
    if (current?.held) return html(await ctx.page(heldNotice(name, current.lockedBy)))
    return html(renderPauseConfirm(ctx, index, name, label))
  }
  if (step === 'resume-confirm') {
    const pause = pauseOf(current)
    if (!pause) return html(await ctx.page(`Task "${name}" is not paused (any more): nothing to resume.`))
    const token = ctx.csrf.issue(
      ctx.who,
      resumeScope(index, name, current!.lockedBy ?? '', current!.lockedAt?.toISOString() ?? ''),
    )
    return html(
      renderConfirmation(ctx.pageInput(token), {
        title: `Resume task “${name}”?`,
        about: `<p>Paused by <strong>${escapeHtml(pause.by)}</strong>${pause.reason ? ` (${escapeHtml(pause.reason)})` : ''} until ${timeHtml(pause.until)}, in ${escapeHtml(label)}.</p>
<p>The task runs again at its next fire time; those that passed during the pause are not run.</p>`,
        hidden: hiddenRecord(current!, index, token),
        step: 'resume',
        button: 'Resume now',
      }),
    )
  }
  if (step === 'pause')
    return html(
      await ctx.page(await pause(form, ctx, { inspector: store.inspector, provider: post.provider }, name, label)),
    )
  if (step === 'resume') {
    // Only the pause the confirmation showed: a pause taken since by someone else stays.
    const same =
      current !== undefined &&
      current.lockedBy === form.get('lockedBy') &&
      current.lockedAt?.toISOString() === form.get('lockedAt')
    if (!same || !pauseOf(current))
      return html(await ctx.page(`Task "${name}" changed since the page showed it: nothing was resumed. Look again.`))
    return html(await ctx.page(await resume(ctx, store.inspector, name, label)))
  }
  return unknownStep(response, step)
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
function renderPauseConfirm(ctx: PauseContext, index: number, name: string, label: string): string {
  const token = ctx.csrf.issue(ctx.who, pauseScope(index, name))
  return renderConfirmation(ctx.pageInput(token), {
    title: `Pause task “${name}”?`,
    about: `<p>Every node (Java ShedLock's too) skips the task while it is paused, in ${escapeHtml(label)}. Fire times that pass during the pause are not run afterwards: a pause is not an outage.</p>`,
    hidden: hiddenTask(token, index, name),
    step: 'pause',
    button: 'Pause now',
    className: 'pause',
    fields: `<p><label for="pause-for">For</label> <input id="pause-for" name="for" placeholder="until resumed" size="12"> <span class="muted">90s, 30m, 8h, 7d; empty: until resumed</span></p>
<p><label for="pause-reason">Reason</label> <input id="pause-reason" name="reason" maxlength="150" size="40"></p>
`,
  })
}
