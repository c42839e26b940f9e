import { hostname, userInfo } from 'node:os'
import { type OptionValues, UsageError } from './command.ts'

// The options of the operator's commands on one task: pause, resume, trigger.

/** Who pauses or triggers by default: `user@host` of this shell (the host alone where the user has no name). */
export function operator(): string {
  let user: string | undefined
  try {
    user = userInfo().username
  } catch {
    user = process.env.USER ?? process.env.USERNAME
  }
  return user ? `${user}@${hostname()}` : hostname()
}

/** The one task NAME of `shedlock <command> NAME`. @throws UsageError for none or several. */
export function taskName(command: string, positionals: string[]): string {
  if (positionals.length === 0 || positionals[0] === '')
    throw new UsageError(`name the task: shedlock ${command} NAME [--url URL] (after --, a name may start with -)`)
  if (positionals.length > 1)
    throw new UsageError(`one task at a time: got ${positionals.map((p) => JSON.stringify(p)).join(', ')}`)
  return positionals[0]!
}

/** `--table`, when given. */
export function tableOption(values: OptionValues): string | undefined {
  return typeof values.table === 'string' ? values.table : undefined
}
