// From node:timers: every runtime the package runs on has it there, not every one as a global.
import { setImmediate } from 'node:timers'

/**
 * Requests made in one turn of the event loop, sent to the store together: a scheduled tick fires
 * many jobs at the same instant (every job's timer expires in the same timers phase), and each
 * would otherwise make its own round trip. The batch is sent from `setImmediate`, which runs
 * after that phase, so a lone request waits for no timer, only for the rest of the turn.
 */
export class TickBatch<T, R> {
  readonly #send: (items: readonly T[]) => Promise<readonly (R | Error)[]>
  readonly #max: number
  #items: T[] = []
  #settle: Settle<R>[] = []
  #scheduled = false

  /**
   * @param send Sends `items` as one and resolves to one answer per item, in their order: an
   *   `Error` rejects that item alone; a rejection rejects them all.
   * @param max The most items sent together; a batch this size is sent at once. @default 500
   */
  constructor(send: (items: readonly T[]) => Promise<readonly (R | Error)[]>, max = 500) {
    this.#send = send
    this.#max = max
  }

  /** Sends `item` with the other requests of this turn; resolves to its answer. */
  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#items.push(item)
      this.#settle.push({ resolve, reject })
      if (this.#items.length >= this.#max) this.#flush()
      else if (!this.#scheduled) {
        this.#scheduled = true
        setImmediate(this.#flush)
      }
    })
  }

  // An arrow, so that setImmediate calls it with no closure made per turn.
  readonly #flush = (): void => {
    this.#scheduled = false
    const items = this.#items
    const settle = this.#settle
    if (items.length === 0) return
    this.#items = []
    this.#settle = []
    let sent: Promise<readonly (R | Error)[]>
    try {
      sent = this.#send(items)
    } catch (error) {
      sent = Promise.reject(error)
    }
    sent.then(
      (answers) => {
        for (let i = 0; i < settle.length; i++) {
          const answer = answers[i]
          if (answer instanceof Error) settle[i]!.reject(answer)
          else if (i < answers.length) settle[i]!.resolve(answer as R)
          else settle[i]!.reject(new TypeError(`a batch of ${items.length} got ${answers.length} answers`))
        }
      },
      (error: unknown) => {
        for (const s of settle) s.reject(error)
      },
    )
  }
}

interface Settle<R> {
  resolve(value: R): void
  reject(error: unknown): void
}
