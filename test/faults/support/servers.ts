import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process'
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { createConnection } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { freePort, portOpen } from '../../helpers/processes.ts'

/**
 * Store servers of the fault suite's own: each on free loopback ports and a data folder of its
 * own, so that a test may kill, stop and restart it. The machine's shared instances (5432, 3306,
 * 6379, 4222, 2379, 2181, 11211) are never touched. Every server logs to `<dir>/server.log`,
 * printed when it fails to come up.
 */
export interface OwnServer {
  /** Short store name, e.g. `postgres`. */
  readonly store: string
  /** The client port on 127.0.0.1. */
  readonly port: number
  /** The data folder; removed by `destroy()`. */
  readonly dir: string
  /** Starts the server (again, on the same port and data) and waits until it answers. */
  start(): Promise<void>
  /** Stops the server; `hard` kills it (SIGKILL, or PostgreSQL's immediate shutdown), as a crash would. */
  stop(hard?: boolean): Promise<void>
  /** True while the server process runs. */
  readonly running: boolean
  /** Stops the server and removes its folder. */
  destroy(): Promise<void>
}

export { freePort, portOpen }

/** Sends `command` on a fresh connection and resolves to the first reply, or '' on failure. */
export function ask(port: number, command: string, timeoutMs = 1000): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    let reply = ''
    const done = (): void => {
      socket.destroy()
      resolve(reply)
    }
    socket.setTimeout(timeoutMs, done)
    socket.once('error', done)
    socket.once('connect', () => socket.write(command))
    socket.on('data', (data) => {
      reply += String(data)
      if (reply.includes('\n') || reply === 'imok') done()
    })
    socket.once('end', done)
  })
}

/** True when `command` runs (`--version` or similar), i.e. the binary is installed. */
export function hasBinary(command: string, args: string[] = ['--version']): boolean {
  try {
    return spawnSync(command, args, { stdio: 'ignore', timeout: 20_000 }).status === 0
  } catch {
    return false
  }
}

interface ProcessServerOptions {
  store: string
  port: number
  dir: string
  command: string
  args: string[]
  /** Resolves to true once the server answers. */
  ready: () => Promise<boolean>
  /** Signal of a soft stop. @default SIGTERM */
  softSignal?: NodeJS.Signals
  /** Signal of a hard stop. @default SIGKILL */
  hardSignal?: NodeJS.Signals
  uid?: number
  gid?: number
  env?: NodeJS.ProcessEnv
  readyTimeoutMs?: number
}

// Servers still running when this process exits (a test run killed by its time limit) die with it.
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/** A server that is one child process, started and stopped by signals. */
class ProcessServer implements OwnServer {
  readonly store: string
  readonly port: number
  readonly dir: string
  readonly #options: ProcessServerOptions
  #child: ChildProcess | undefined
  #exit: Promise<void> | undefined

  constructor(options: ProcessServerOptions) {
    this.store = options.store
    this.port = options.port
    this.dir = options.dir
    this.#options = options
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null
  }

  async start(): Promise<void> {
    if (this.running) return
    const o = this.#options
    const log = openSync(join(this.dir, 'server.log'), 'a')
    const child = spawn(o.command, o.args, {
      stdio: ['ignore', log, log],
      cwd: this.dir,
      env: { ...process.env, ...o.env },
      ...(o.uid === undefined ? {} : { uid: o.uid, gid: o.gid }),
    })
    closeSync(log)
    this.#child = child
    running.add(child)
    this.#exit = new Promise((resolve) =>
      child.once('exit', () => {
        running.delete(child)
        resolve()
      }),
    )
    child.once('error', () => {})
    const deadline = Date.now() + (o.readyTimeoutMs ?? 60_000)
    for (;;) {
      if (!this.running)
        throw new Error(
          `${this.store} server exited while starting (exit ${child.exitCode ?? child.signalCode}):\n${this.#tail()}`,
        )
      if (await o.ready().catch(() => false)) return
      if (Date.now() > deadline) {
        await this.stop(true)
        throw new Error(`${this.store} server did not come up on port ${this.port}:\n${this.#tail()}`)
      }
      await sleep(150)
    }
  }

  async stop(hard = false): Promise<void> {
    const child = this.#child
    if (!child || !this.running) return
    child.kill(hard ? (this.#options.hardSignal ?? 'SIGKILL') : (this.#options.softSignal ?? 'SIGTERM'))
    const exited = await Promise.race([this.#exit!.then(() => true), sleep(30_000).then(() => false)])
    if (!exited) {
      child.kill('SIGKILL')
      await this.#exit
    }
    this.#child = undefined
    // The port must be free again before a restart binds it.
    for (let i = 0; i < 100 && (await portOpen(this.port, 200)); i++) await sleep(100)
  }

  async destroy(): Promise<void> {
    await this.stop(true)
    rmSync(this.dir, { recursive: true, force: true })
  }

  #tail(): string {
    try {
      return readFileSync(join(this.dir, 'server.log'), 'utf8').split('\n').slice(-30).join('\n')
    } catch {
      return '(no log)'
    }
  }
}

const tempDir = (store: string): string => mkdtempSync(join(tmpdir(), `shedlock-faults-${store}-`))

function userIds(name: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`))
  if (!line) throw new Error(`no user ${name}`)
  const [, , uid, gid] = line.split(':')
  return { uid: Number(uid), gid: Number(gid) }
}

/** The newest PostgreSQL's bin folder (Debian layout), or undefined. */
export function postgresBin(): string | undefined {
  try {
    const versions = execFileSync('ls', ['/usr/lib/postgresql'], { encoding: 'utf8' }).split('\n').filter(Boolean)
    const newest = versions.sort((a, b) => Number(a) - Number(b)).at(-1)
    return newest ? `/usr/lib/postgresql/${newest}/bin` : undefined
  } catch {
    return undefined
  }
}

/** The user and password of the password-protected account of the SQL servers (secrets tests). */
export const SECRET_USER = 'shedlock_secret'
export const SECRET_PASSWORD = 'Pw-d0nt-l34k-7f3a9c'

/**
 * A PostgreSQL cluster in a temporary folder (initdb, then `postgres`; as the `postgres` user
 * when we are root, since PostgreSQL refuses to run as root). Trust for `postgres` on loopback, SCRAM for
 * {@link SECRET_USER}. fsync is off: the suite tests crashes of the server process, not of the
 * machine, and the OS keeps what the process wrote. Commits stay synchronous (the default):
 * asynchronous commit would lose the last lock writes in a crash. A hard stop is an immediate shutdown
 * (SIGQUIT): no checkpoint, crash recovery at the next start.
 */
export async function startPostgres(): Promise<OwnServer> {
  const bin = postgresBin()
  if (!bin) throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (install postgresql)')
  const dir = tempDir('postgres')
  // PostgreSQL refuses to run as root: as root, run it as the postgres user; else as ourselves.
  const { uid, gid } = process.getuid?.() === 0 ? userIds('postgres') : { uid: undefined, gid: undefined }
  if (uid !== undefined) chownSync(dir, uid, gid!)
  const data = join(dir, 'data')
  const asUser = uid === undefined ? {} : { uid, gid }
  execFileSync(
    join(bin, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync'],
    {
      ...asUser,
      stdio: 'ignore',
      cwd: dir,
    },
  )
  writeFileSync(
    join(data, 'pg_hba.conf'),
    [
      'local all all trust',
      `host all ${SECRET_USER} 127.0.0.1/32 scram-sha-256`,
      'host all all 127.0.0.1/32 trust',
      '',
    ].join('\n'),
  )
  if (uid !== undefined) chownSync(join(data, 'pg_hba.conf'), uid, gid!)
  const port = await freePort()
  const server = new ProcessServer({
    store: 'postgres',
    port,
    dir,
    command: join(bin, 'postgres'),
    args: [
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'max_connections=300',
      '-c',
      'shared_buffers=32MB',
    ],
    ready: async () =>
      spawnSync(join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-U', 'postgres']).status === 0,
    softSignal: 'SIGINT',
    hardSignal: 'SIGQUIT',
    ...asUser,
  })
  await server.start()
  execFileSync(
    join(bin, 'psql'),
    [
      '-h',
      '127.0.0.1',
      '-p',
      String(port),
      '-U',
      'postgres',
      '-d',
      'postgres',
      '-qc',
      `CREATE USER ${SECRET_USER} PASSWORD '${SECRET_PASSWORD}' SUPERUSER`,
    ],
    { stdio: 'ignore' },
  )
  return server
}

/**
 * A MariaDB (or MySQL-compatible mariadbd) server on a temporary datadir, port and socket. Root
 * has no password over TCP; {@link SECRET_USER} has {@link SECRET_PASSWORD}. Flushing the redo
 * log once a second is enough: crashes here are of the server process, not of the machine.
 */
export async function startMariaDb(): Promise<OwnServer> {
  const dir = tempDir('mysql')
  const data = join(dir, 'data')
  mkdirSync(data)
  const asRoot = process.getuid?.() === 0 ? ['--user=root'] : []
  execFileSync(
    'mariadb-install-db',
    [
      '--no-defaults',
      `--datadir=${data}`,
      ...asRoot,
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      '--skip-name-resolve',
    ],
    { stdio: 'ignore', cwd: dir },
  )
  const port = await freePort()
  const server = new ProcessServer({
    store: 'mysql',
    port,
    dir,
    command: existsSync('/usr/sbin/mariadbd') ? '/usr/sbin/mariadbd' : 'mariadbd',
    args: [
      '--no-defaults',
      `--datadir=${data}`,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(dir, 'mysqld.sock')}`,
      `--pid-file=${join(dir, 'mysqld.pid')}`,
      ...asRoot,
      '--skip-name-resolve',
      '--skip-log-bin',
      '--performance-schema=OFF',
      '--innodb-buffer-pool-size=32M',
      '--innodb-log-file-size=16M',
      '--innodb-flush-log-at-trx-commit=2',
      '--max-connections=400',
    ],
    ready: async () =>
      spawnSync('mariadb-admin', ['--no-defaults', '-h', '127.0.0.1', '-P', String(port), '-uroot', 'ping'], {
        stdio: 'ignore',
      }).status === 0,
  })
  await server.start()
  const sql = [
    'CREATE DATABASE IF NOT EXISTS test',
    // --skip-name-resolve: TCP clients from 127.0.0.1 match only host '127.0.0.1' or '%'.
    "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'",
    "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
    `CREATE USER IF NOT EXISTS '${SECRET_USER}'@'%' IDENTIFIED BY '${SECRET_PASSWORD}'`,
    `GRANT ALL ON test.* TO '${SECRET_USER}'@'%'`,
  ].join(';\n')
  execFileSync('mariadb', ['--no-defaults', `--socket=${join(dir, 'mysqld.sock')}`, '-uroot', '-e', sql], {
    stdio: 'ignore',
  })
  return server
}

/** Options of {@link startRedis}. */
export interface RedisServerOptions {
  /** Append-only file, fsynced on every write: the lock keys survive a crash. @default false (no persistence, Redis's default with `save ""`) */
  persistent?: boolean
  /** `requirepass`. */
  password?: string
}

/** A redis-server of our own. Without `persistent` it keeps nothing on disk. */
export async function startRedis(options: RedisServerOptions = {}): Promise<OwnServer> {
  const dir = tempDir('redis')
  const port = await freePort()
  const args = [
    '--bind',
    '127.0.0.1',
    '--port',
    String(port),
    '--dir',
    dir,
    '--save',
    '',
    '--maxmemory-policy',
    'noeviction',
  ]
  args.push(...(options.persistent ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']))
  if (options.password) args.push('--requirepass', options.password)
  const server = new ProcessServer({
    store: 'redis',
    port,
    dir,
    command: 'redis-server',
    args,
    ready: async () => /^[+-](PONG|NOAUTH)/.test(await ask(port, 'PING\r\n')),
  })
  await server.start()
  return server
}

/** A nats-server with JetStream on a file store of our own; `user`/`password` require them. */
export async function startNats(options: { user?: string; password?: string } = {}): Promise<OwnServer> {
  const dir = tempDir('nats')
  const port = await freePort()
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', join(dir, 'js')]
  if (options.user) args.push('--user', options.user, '--pass', options.password ?? '')
  const server = new ProcessServer({
    store: 'nats',
    port,
    dir,
    command: 'nats-server',
    args,
    ready: async () => (await ask(port, '')).startsWith('INFO'),
  })
  await server.start()
  return server
}

/** A single-member etcd cluster of our own (client and peer ports free, data folder of our own). */
export async function startEtcd(): Promise<OwnServer> {
  const dir = tempDir('etcd')
  const port = await freePort()
  const peer = `http://127.0.0.1:${await freePort()}`
  const url = `http://127.0.0.1:${port}`
  const args = [
    '--name',
    'faults',
    '--data-dir',
    join(dir, 'data'),
    '--listen-client-urls',
    url,
    '--advertise-client-urls',
    url,
    '--listen-peer-urls',
    peer,
    '--initial-advertise-peer-urls',
    peer,
    '--initial-cluster',
    `faults=${peer}`,
  ]
  const server = new ProcessServer({
    store: 'etcd',
    port,
    dir,
    command: 'etcd',
    args,
    ready: async () => {
      const reply = await ask(port, 'GET /health HTTP/1.0\r\n\r\n', 2000)
      return /"health":\s*"true"/.test(reply) || reply.startsWith('HTTP/1.0 200')
    },
  })
  await server.start()
  return server
}

/** A memcached of our own (64 MB, no UDP). It keeps nothing across a restart. */
export async function startMemcached(): Promise<OwnServer> {
  const dir = tempDir('memcached')
  const port = await freePort()
  const server = new ProcessServer({
    store: 'memcached',
    port,
    dir,
    command: 'memcached',
    args: ['-p', String(port), '-U', '0', '-l', '127.0.0.1', '-m', '64', '-u', 'nobody', '-c', '4096'],
    ready: async () => (await ask(port, 'version\r\n')).startsWith('VERSION'),
  })
  await server.start()
  return server
}

/** A standalone ZooKeeper (the Debian package's jar, run by `java`) with its own data folder. */
export async function startZooKeeper(): Promise<OwnServer> {
  const dir = tempDir('zookeeper')
  const port = await freePort()
  writeFileSync(
    join(dir, 'zoo.cfg'),
    [
      `tickTime=2000`,
      `dataDir=${join(dir, 'data')}`,
      `clientPort=${port}`,
      'clientPortAddress=127.0.0.1',
      'admin.enableServer=false',
      '4lw.commands.whitelist=ruok',
      'maxClientCnxns=0',
      '',
    ].join('\n'),
  )
  const server = new ProcessServer({
    store: 'zookeeper',
    port,
    dir,
    command: 'java',
    args: [
      '-Xmx192m',
      '-XX:+UseSerialGC',
      '-XX:-UsePerfData',
      '-Dzookeeper.root.logger=INFO,CONSOLE',
      '-cp',
      '/etc/zookeeper/conf:/usr/share/java/zookeeper.jar',
      'org.apache.zookeeper.server.ZooKeeperServerMain',
      join(dir, 'zoo.cfg'),
    ],
    ready: async () => (await ask(port, 'ruok', 1000)) === 'imok',
    readyTimeoutMs: 90_000,
  })
  await server.start()
  return server
}

/** dynalite (DynamoDB) in a child process of its own, its tables in a LevelDB folder, so they survive a restart. */
export async function startDynalite(): Promise<OwnServer> {
  const dir = tempDir('dynamodb')
  const port = await freePort()
  const script = fileURLToPath(new URL('./dynalite-server.mjs', import.meta.url))
  const server = new ProcessServer({
    store: 'dynamodb',
    port,
    dir,
    command: process.execPath,
    args: [script, String(port), join(dir, 'data')],
    ready: async () => (await ask(port, 'GET / HTTP/1.0\r\n\r\n', 1000)).startsWith('HTTP/1.1'),
  })
  await server.start()
  return server
}

/** The shared Ceph cluster of scripts/ceph-rgw.sh (monitor and memstore OSD): its config file. */
const CEPH_CONF = join(process.env.SHEDLOCK_CEPH_DIR ?? '/tmp/shedlock-ceph', 'ceph.conf')

/**
 * A RADOS Gateway of our own (S3 on a free port) in front of the shared Ceph cluster that
 * scripts/ceph-rgw.sh starts: Ceph is too heavy to start per test file (about 15 s), but a
 * second gateway starts in under a second, and killing it stands for an outage of the S3
 * endpoint while the objects live on in RADOS. The shared gateway on 7480 is never touched.
 */
export async function startRadosgw(): Promise<OwnServer> {
  if (!existsSync(CEPH_CONF)) throw new Error(`no Ceph cluster at ${CEPH_CONF}: start it with scripts/ceph-rgw.sh`)
  const dir = tempDir('s3')
  const port = await freePort()
  const args = [
    '-f',
    '-c',
    CEPH_CONF,
    '-n',
    `client.rgw.faults${port}`,
    '--rgw-frontends',
    `beast endpoint=127.0.0.1:${port}`,
  ]
  args.push(
    '--rgw-data',
    join(dir, 'data'),
    '--pid-file',
    join(dir, 'rgw.pid'),
    '--admin-socket',
    join(dir, 'rgw.asok'),
    '--log-file',
    join(dir, 'rgw.log'),
    '--debug-rgw',
    '0/0',
  )
  mkdirSync(join(dir, 'data'))
  const server = new ProcessServer({
    store: 's3',
    port,
    dir,
    command: 'radosgw',
    args,
    ready: async () => (await ask(port, 'GET / HTTP/1.0\r\n\r\n', 1000)).startsWith('HTTP/1.1'),
  })
  await server.start()
  return server
}

/** azurite's Blob service: `AZURITE_BLOB`, else the devDependency's binary. */
const AZURITE_BLOB =
  process.env.AZURITE_BLOB ?? fileURLToPath(new URL('../../../node_modules/.bin/azurite-blob', import.meta.url))

/**
 * azurite's Blob service of our own, its blobs in a folder (not in memory), so that what it
 * wrote before a crash is there after the restart, as Azure keeps its blobs through an outage.
 */
export async function startAzurite(): Promise<OwnServer> {
  if (!existsSync(AZURITE_BLOB))
    throw new Error(`no azurite-blob at ${AZURITE_BLOB} (a devDependency; or set AZURITE_BLOB)`)
  const dir = tempDir('azure-blob')
  const port = await freePort()
  const args = [
    '--blobHost',
    '127.0.0.1',
    '--blobPort',
    String(port),
    '--location',
    join(dir, 'data'),
    '--loose',
    '--skipApiVersionCheck',
    '--disableTelemetry',
    '--silent',
  ]
  const server = new ProcessServer({
    store: 'azure-blob',
    port,
    dir,
    command: AZURITE_BLOB,
    args,
    ready: async () =>
      (await ask(port, 'GET /devstoreaccount1?comp=list HTTP/1.0\r\n\r\n', 1000)).startsWith('HTTP/1.1'),
  })
  await server.start()
  return server
}
