import type { ServerResponse } from 'node:http'
import { formatDuration } from '../core/duration.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import { describePause, pauseOf } from '../core/pause.ts'
import { redact } from '../core/redact.ts'
import { messageOf } from '../core/task.ts'
import { TRIGGER_TTL_MS, triggerHolder } from '../core/trigger.ts'
import { takeTrigger, waitForPickUp } from '../status/trigger-control.ts'
import { escapeHtml } from './escape.ts'
import { send, sendText } from './http.ts'
import { type PageInput, query, renderPage } from './page.ts'
import { CONFIRM_SCOPE, CSRF_FAILED, type ReleaseContext } from './release.ts'

// "Run now" from the dashboard: what `shedlock trigger` does (status/trigger-control.ts), behind a
// confirmation page whose token is good for that one trigger, with an audit line. The page waits
// a few seconds for a replica to pick the trigger up and says whether one did; it never withdraws
// it (the command does, to say that nobody listens): a trigger left pending lapses by itself.

// How long the confirmed post waits to tell the operator that a replica picked the trigger up.
const PAGE_WAIT_MS = 5_000

/** The scope of a trigger confirmation's token: a trigger of this task of this store, nothing else. */
export function triggerScope(store: number, lock: string): string {
  return JSON.stringify(['trigger', store, lock])
}

/** What a trigger post needs of the handler, besides what a release needs. */
export interface TriggerContext extends ReleaseContext {
  /** Per store (by index): its provider holding locks as `lockedBy`, where triggering is on. */
  readonly triggerers: readonly (((lockedBy: string) => LockProvider) | undefined)[]
  /** The page to render a confirmation into (no store is read for it), with `csrf` its token. */
  pageInput(csrf: string): PageInput
}

/** Answers the trigger forms: `trigger-confirm` with a confirmation page, `trigger` by taking the trigger. */
export async function answerTrigger(
  form: URLSearchParams,
  response: ServerResponse,
  ctx: TriggerContext,
): Promise<void> {
  const step = form.get('step') ?? ''
  const index = Number(form.get('store'))
  const name = form.get('lock') ?? ''
  const scope = step === 'trigger' ? triggerScope(index, name) : CONFIRM_SCOPE
  if (!ctx.sameOrigin || !ctx.csrf.take(ctx.who, form.get('csrf'), scope)) return sendText(response, 403, CSRF_FAILED)
  const store = Number.isInteger(index) ? ctx.stores[index] : undefined
  const triggerer = Number.isInteger(index) ? ctx.triggerers[index] : undefined
  if (store === undefined || name === '') return sendText(response, 400, 'shedlock dashboard: the form names no lock\n')
  if (triggerer === undefined)
    return sendText(
      response,
      403,
      'shedlock dashboard: triggering is off for this store (allowTrigger, --allow-trigger)\n',
    )
  const html = (body: string): void => send(response, 200, 'text/html; charset=utf-8', body, ctx.nonce)
  const label = redact(store.label)
  // A paused task would keep the trigger pending until it lapses: every replica finds it held.
  const pause = pauseOf(await store.inspector.get(name))
  if (pause) return html(await ctx.page(`Task "${name}" is ${describePause(pause)}: resume it first; not triggered.`))
  if (step === 'trigger-confirm') {
    const input = ctx.pageInput(ctx.csrf.issue(ctx.who, triggerScope(index, name)))
    return html(renderTriggerConfirm(input, label, name, index))
  }
  if (step !== 'trigger')
    return sendText(response, 400, `shedlock dashboard: unknown step ${JSON.stringify(step)}; use the page's buttons\n`)
  return html(await ctx.page(await trigger(ctx, store.inspector, triggerer, name, label)))
}

async function trigger(
  ctx: TriggerContext,
  inspector: ReleaseContext['stores'][number]['inspector'],
  provider: (lockedBy: string) => LockProvider,
  name: string,
  label: string,
): Promise<string> {
  try {
    const taken = await takeTrigger({ inspector, provider }, name, triggerHolder(ctx.who))
    if (taken.result === 'already-triggered')
      return `A trigger of task "${name}" by ${taken.by} is already pending: not triggered again.`
    ctx.audit(
      `shedlock dashboard: ${new Date().toISOString()} ${ctx.who} triggered task ${JSON.stringify(name)} of ${label}`,
    )
    const afterMs = taken.record ? await waitForPickUp({ inspector }, taken.record, PAGE_WAIT_MS) : undefined
    if (afterMs !== undefined)
      return `Triggered task "${name}": a replica picked it up after ${(afterMs / 1000).toFixed(1)} s and runs it through its lock.`
    return `Triggered task "${name}": no replica has picked it up within ${PAGE_WAIT_MS / 1000} s. Replicas run triggers only when their executor polls for them (triggers: { poll }); a run holding the lock delays it. Unless picked up, the trigger lapses after ${formatDuration(TRIGGER_TTL_MS)}.`
  } catch (error) {
    // A store that cannot hold a trigger (NATS, ZooKeeper, memcached), or one that failed.
    return `Task "${name}" was not triggered: ${redact(messageOf(error))}`
  }
}

/** The confirmation page of a trigger. */
function renderTriggerConfirm(input: PageInput, label: string, name: string, store: number): string {
  const field = (n: string, v: string): string => `<input type="hidden" name="${n}" value="${escapeHtml(v)}">`
  const hidden = field('csrf', input.csrf!) + field('store', String(store)) + field('lock', name)
  const back = query({ window: input.window, q: input.filter })
  const body = `<h2>Run task “${escapeHtml(name)}” now?</h2>
<p>One replica whose executor polls for triggers runs it once, through the task's lock, in ${escapeHtml(label)}: never beside a run that holds the lock, which it waits for. It is recorded in the history as triggered by you.</p>
<form method="post" action="${back}">${hidden}<input type="hidden" name="step" value="trigger">
<button type="submit" class="danger" autofocus>Run now</button> <a href="${back}">Cancel</a></form>`
  return renderPage({ ...input, refreshSeconds: 0 }, body)
}
