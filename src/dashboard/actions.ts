import { LockConfigurationError } from '../core/errors.ts'
import type { LockProvider } from '../core/lock-provider.ts'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { FormTooLargeError, readForm, sendText } from './http.ts'
import type { OperatorProviders } from './operator-action.ts'
import { answerPause, type PauseContext } from './pause.ts'
import { answerRelease } from './release.ts'
import { answerTrigger, type TriggerContext } from './trigger.ts'

// The fields of the action forms; each once: with two `lock` fields, which one was confirmed?
const FIELDS = ['csrf', 'store', 'lock', 'lockedBy', 'lockedAt', 'step', 'for', 'reason']
const PAUSE_STEPS = new Set(['pause-confirm', 'pause', 'resume-confirm', 'resume'])
const TRIGGER_STEPS = new Set(['trigger-confirm', 'trigger'])

/** What an action post needs of the handler, and which actions are on. */
export interface ActionContext extends PauseContext, TriggerContext {
  readonly allowRelease: boolean
}

/** Per store (by index): its provider where `on` and the store has one, for pauses or triggers. */
export function operatorProviders(
  stores: readonly { readonly provider?: ((lockedBy: string) => LockProvider) | undefined }[],
  on: boolean,
  option: string,
): OperatorProviders {
  const providers = stores.map((store) => (on && typeof store.provider === 'function' ? store.provider : undefined))
  if (on && providers.every((provider) => provider === undefined))
    throw new LockConfigurationError(
      `createDashboard(): ${option} needs a store with a provider: stores[i].provider = (lockedBy) => postgresLockProvider({ client, lockedBy })`,
    )
  return providers
}

/**
 * Answers a form of the page: a release (`step` `confirm`, `release`), a pause or resume
 * (`pause-confirm`, `pause`, `resume-confirm`, `resume`) or a trigger (`trigger-confirm`,
 * `trigger`), each checked for its CSRF token there.
 */
export async function postAction(
  request: IncomingMessage,
  response: ServerResponse,
  ctx: ActionContext,
): Promise<void> {
  let form: URLSearchParams
  try {
    form = await readForm(request)
  } catch (error) {
    if (!(error instanceof FormTooLargeError)) throw error
    // The rest of the body is not read: the connection cannot carry another request.
    response.setHeader('connection', 'close')
    return sendText(response, 413, error.message)
  }
  const twice = FIELDS.find((field) => form.getAll(field).length > 1)
  if (twice !== undefined)
    return sendText(
      response,
      400,
      `shedlock dashboard: the form gives "${twice}" more than once; use the page's buttons\n`,
    )
  if (PAUSE_STEPS.has(form.get('step') ?? '')) return answerPause(form, response, ctx)
  if (TRIGGER_STEPS.has(form.get('step') ?? '')) return answerTrigger(form, response, ctx)
  if (!ctx.allowRelease)
    return sendText(
      response,
      403,
      'shedlock dashboard: releasing is off; start it with --allow-release (allowRelease: true) to release locks\n',
    )
  return answerRelease(form, response, ctx)
}
