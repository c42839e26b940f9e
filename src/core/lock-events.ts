import { debuglog } from 'node:util'
import type { ActiveLockEvents } from './active-lock.ts'
import type { LockExecution } from './diagnostics.ts'
import type { Emit } from './executor-events.ts'
import { messageOf } from './task.ts'

const debug = debuglog('shedlock')

/** What a task lock reports of itself while its task runs: its extensions and its loss, to the listener and the debug log. */
export function reportingEvents(emit: Emit, execution: LockExecution): ActiveLockEvents {
  return {
    onExtended: (next) => {
      if (debug.enabled)
        debug('Lock "%s" extended: held at most until %s', next.name, next.lockAtMostUntil.toISOString())
      emit('onLockExtended', execution, next)
    },
    onLost: (current, reason) => {
      if (debug.enabled)
        debug(
          'Lock "%s" lost: %s%s',
          current.name,
          reason.message,
          reason.cause === undefined ? '' : ` (${messageOf(reason.cause)})`,
        )
      emit('onLockLost', execution, current, reason)
    },
  }
}
