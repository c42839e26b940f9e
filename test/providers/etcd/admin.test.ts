import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import { etcdLockProvider } from '../../../src/providers/etcd/index.ts'
import { ETCD_URL, etcdOrSkip } from '../../helpers/kv-clients.ts'
import { cliBasics } from '../../cli/support/proof.ts'
import { startCli } from '../../cli/support/cli.ts'
import { waitFor } from '../../helpers/processes.ts'

const url = ETCD_URL
const etcd = await etcdOrSkip()

describe.skipIf(!etcd)('shedlock CLI on etcd (the built bin)', () => {
  const client = etcd!
  const environment = `cli-test-${process.pid}-${randomBytes(3).toString('hex')}`
  const cliUrl = `${url.replace(/^https?:/, 'etcd:')}?environment=${environment}`
  afterAll(async () => {
    await client.delete().prefix(`shedlock:${environment}:`)
    client.close()
  })

  cliBasics({
    kind: /^etcd /,
    args: ['--url', cliUrl],
    provider: () => etcdLockProvider({ client, environment }),
    isHeld: async (name) => (await client.get(`shedlock:${environment}:${name}`).string()) !== null,
    init: { args: ['--url', cliUrl], first: /etcd needs no setup/, again: /etcd needs no setup/ },
  })

  it('dashboard: the page names the stores that keep a run history, etcd not among them', async () => {
    const dashboard = startCli(['dashboard', '--url', cliUrl, '--port', '0', '--refresh', '0'])
    try {
      const up = await waitFor(() => /on (http:\/\/\S+\/) /.test(dashboard.stdout()), 15_000)
      expect(up, dashboard.stderr()).toBe(true)
      const html = await (await fetch(/on (http:\/\/\S+\/) /.exec(dashboard.stdout())![1]!)).text()
      expect(html).toMatch(
        /This store keeps no run history: tasks and runs are shown for the stores with a run ledger \(PostgreSQL, [^)]*Redis[^)]*\)\./,
      )
      expect(html).not.toMatch(/run ledger \([^)]*etcd/)
    } finally {
      dashboard.child.kill('SIGTERM')
      await dashboard.exited
    }
  })
})
