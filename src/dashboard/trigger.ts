import type { ServerResponse } from 'node:http'
import { formatDuration } from '../core/duration.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import { describePause, pauseOf } from '../core/pause.ts'
import { redact } from '../core/redact.ts'
import { messageOf } from '../core/task.ts'
import { TRIGGER_TTL_MS, triggerHolder } from '../core/trigger.ts'
import { takeTrigger, waitForPickUp } from '../status/trigger-control.ts'
import { escapeHtml } from './escape.ts'
import {
  checkOperatorPost,
  hiddenTask,
  type OperatorContext,
  type OperatorProviders,
  renderConfirmation,
  unknownStep,
} from './operator-action.ts'
import { CONFIRM_SCOPE, type ReleaseContext } from './release.ts'

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
export interface TriggerContext extends OperatorContext {
  /** Per store (by index): its provider holding locks as `lockedBy`, where triggering is on. */
  readonly triggerers: OperatorProviders
}

/** Answers the trigger forms: `trigger-confirm` with a confirmation page, `trigger` by taking the trigger. */
export async function answerTrigger(
  form: URLSearchParams,
  response: ServerResponse,
  ctx: TriggerContext,
): Promise<void> {
  const post = checkOperatorPost(form, response, ctx, {
    scope: (step, index, name) => (step === 'trigger' ? triggerScope(index, name) : CONFIRM_SCOPE),
    providers: ctx.triggerers,
    off: 'triggering is off for this store (allowTrigger, --allow-trigger)',
  })
  if (post === undefined) return
  const { step, index, name, store, label, html } = post
  // A paused task would keep the trigger pending until it lapses: every replica finds it held.
  const pause = pauseOf(await store.inspector.get(name))
  if (pause) return html(await ctx.page(`Task "${name}" is ${describePause(pause)}: resume it first; not triggered.`))
  if (step === 'trigger-confirm') {
    const token = ctx.csrf.issue(ctx.who, triggerScope(index, name))
    return html(
      renderConfirmation(ctx.pageInput(token), {
        title: `Run task “${name}” now?`,
        about: `<p>One replica whose executor polls for triggers runs it once, through the task's lock, in ${escapeHtml(label)}: never beside a run that holds the lock, which it waits for. It is recorded in the history as triggered by you.</p>`,
        hidden: hiddenTask(token, index, name),
        step: 'trigger',
        button: 'Run now',
      }),
    )
  }
  if (step !== 'trigger') return unknownStep(response, step)
  return html(await ctx.page(await trigger(ctx, store.inspector, post.provider, name, label)))
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
