/** `scheme://user:password@` anywhere in a text; the password is group 2. */
export const URL_PASSWORD: RegExp = /([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*):([^@\s/]*)@/gi

/**
 * `text` with the password of every `scheme://user:password@` replaced by `***`. Drivers do not
 * put passwords into their messages, but a connection URL in some wrapper's message might; every
 * error text shedlock stores or prints passes through here.
 */
export function redactUrlPasswords(text: string): string {
  return text.replace(URL_PASSWORD, '$1:***@')
}
