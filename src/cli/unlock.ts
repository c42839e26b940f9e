import { createInterface } from 'node:readline/promises'
import { CliError, type Command, EXIT_FAILURE, EXIT_OK, parseArguments, UsageError } from './command.ts'
import { describeHolder, isoUtc, lockJson } from './lock-table.ts'
import { withStore } from './open-store.ts'
import { storeUrlOption, URL_HELP } from './store-url.ts'

const HELP = `Usage: shedlock unlock NAME [--url URL] [--table NAME] [--yes] [--json]
       shedlock unlock --name NAME [options]
       shedlock unlock [options] -- NAME   (a NAME that starts with -)

Force-releases one lock, for a holder that died or hangs. Shows who holds it,
then asks for confirmation (unless --yes). Only the lock as shown is released:
if another node took it in the meantime, nothing changes.

SQL, MongoDB and DynamoDB records stay, with lockUntil set to now (as the
providers leave a released lock); ZooKeeper nodes get lockUntil now; Redis,
etcd, NATS and memcached keys are deleted.

Releasing a lock whose holder still runs lets another node start the same
task at once.

Options:
${URL_HELP}
  --name NAME    the lock to release, as the NAME argument
  --yes          release without asking (needed when stdin is not a terminal)
  --json         print one JSON document instead: { name, result, lock },
                 result being released or not-held, lock the record as list
                 --json prints it (before the release); failures stay on
                 stderr with exit code 1
  -h, --help     show this help

Exit codes: 0 released, or not held; 1 no such lock, not confirmed, changed
            meanwhile, or the store failed; 2 usage error (also: no --yes
            and no terminal to ask on)
`

/** `shedlock unlock`. */
export const unlockCommand: Command = {
  name: 'unlock',
  summary: 'force-release one lock, after showing its holder and asking',
  help: HELP,
  async run(args) {
    const { values, positionals } = parseArguments(args, {
      url: { type: 'string' },
      table: { type: 'string' },
      name: { type: 'string' },
      yes: { type: 'boolean' },
      json: { type: 'boolean' },
    })
    const name = lockName(positionals, values.name)
    const url = storeUrlOption(values)
    const confirmed = values.yes === true
    const json = values.json === true
    // Decided before connecting: a script that forgot --yes should learn it without touching the store.
    if (!confirmed && !process.stdin.isTTY) {
      throw new UsageError(
        `refusing to release lock ${JSON.stringify(name)} without confirmation: stdin is not a terminal; pass --yes`,
      )
    }
    const table = typeof values.table === 'string' ? values.table : undefined
    return withStore(url, { table }, async (store) => {
      const { inspector } = store
      const record = await inspector.get(name)
      if (!record)
        throw new CliError(`no lock named ${JSON.stringify(name)} in ${store.where}; "shedlock list" shows the names`)
      const report = (result: 'released' | 'not-held'): void => {
        process.stdout.write(`${JSON.stringify({ name, result, lock: lockJson(record) }, null, 2)}\n`)
      }
      if (!record.held) {
        if (json) report('not-held')
        else
          process.stdout.write(
            `lock ${JSON.stringify(name)} is not held (free since ${isoUtc(record.lockUntil!)}); nothing to release\n`,
          )
        return EXIT_OK
      }
      // With --json the holder is in the document; the question, if any, goes to stderr.
      if (!json) process.stdout.write(`lock ${JSON.stringify(name)} is ${describeHolder(record)}\n`)
      const question = `${json ? `Lock ${JSON.stringify(name)} is ${describeHolder(record)}. ` : ''}Release it? A node may then start the task at once. [y/N] `
      if (!confirmed && !(await ask(question))) {
        if (json) throw new CliError(`lock ${JSON.stringify(name)} was not released: not confirmed`)
        process.stdout.write('not released\n')
        return EXIT_FAILURE
      }
      if (await inspector.release(record)) {
        if (json) report('released')
        else process.stdout.write(`released lock ${JSON.stringify(name)}\n`)
        return EXIT_OK
      }
      const current = await inspector.get(name)
      const state = !current ? 'it is gone' : !current.held ? 'it is free now' : `it is now ${describeHolder(current)}`
      throw new CliError(
        `lock ${JSON.stringify(name)} changed after it was read (${state}); nothing was released. Run shedlock unlock again to see it`,
      )
    })
  },
}

/** The lock to release: NAME, as history takes its task, or `--name NAME`, as before; one of them, once. */
function lockName(positionals: string[], flag: string | boolean | undefined): string {
  const given = [...positionals, ...(typeof flag === 'string' ? [flag] : [])]
  if (given.length === 0 || given.some((name) => name === ''))
    throw new UsageError('name the lock: shedlock unlock NAME [--url URL] (after --, a name may start with -)')
  if (new Set(given).size > 1)
    throw new UsageError(`one lock at a time: got ${given.map((name) => JSON.stringify(name)).join(', ')}`)
  return given[0]!
}

async function ask(question: string): Promise<boolean> {
  const readline = createInterface({ input: process.stdin, output: process.stderr })
  try {
    return /^y(es)?$/i.test((await readline.question(question)).trim())
  } finally {
    readline.close()
  }
}
