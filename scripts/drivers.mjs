// The driver versions shedlock is tested with, one place for all of them: each store's docs
// page states its drivers' ranges (test/package-exports.test.ts checks them against this table),
// and scripts/oldest-drivers.sh installs each range's lowest version and runs the tests named
// here (CI, after `npm test`, which runs them on the newest versions package-lock.json pins).
//
// The drivers are not peer dependencies: shedlock never imports a driver for its types or at
// module load, it takes the client the application made. A peer range makes npm refuse the whole
// install (ERESOLVE) for a project whose driver is outside it, even a newer major that works, and
// `npm ls` lists every optional peer a project does not use as "UNMET OPTIONAL DEPENDENCY".
//
// `range`: what the docs state, lowest alternative first (`^x.y.z` alternatives, or one
// `>=x.y.z <a.b.c` for a 0.x library whose every minor is a caret range of its own); `oldest`:
// the version CI installs, the lowest the range allows; `why`: why the range starts there (what
// breaks below it). The ORMs and query builders of shedlock/orm/* are here too: docs/orm.md.

/** @type {Record<string, { range: string, oldest: string, pages: string[], tests: string[], why: string }>} */
export const DRIVERS = {
  pg: {
    range: '^8.11.0',
    oldest: '8.11.0',
    pages: ['docs/providers/postgres.md'],
    tests: ['test/providers/postgres'],
    why: "before 8.0.3 a connection never completes on Node >= 14; 8.0.3 failed the suite's serialization-failure races (not bisected between 8.0.3 and 8.11.0, the version of the issue that asked for it)",
  },
  mysql2: {
    range: '^3.0.0',
    oldest: '3.0.0',
    pages: ['docs/providers/mysql.md'],
    tests: ['test/providers/mysql'],
    why: 'the 3.x line',
  },
  ioredis: {
    range: '^5.3.0 || ^6.0.0',
    oldest: '5.3.0',
    pages: ['docs/providers/redis.md'],
    tests: ['test/providers/redis'],
    why: 'the named export `Redis` (the docs import { Redis }) appeared in 5.3.0; before 5.10 a refused AUTH resolves connect(), which the CLI checks for',
  },
  redis: {
    range: '^5.0.0 || ^6.0.0',
    oldest: '5.0.0',
    pages: ['docs/providers/redis.md'],
    tests: ['test/providers/redis'],
    why: 'on node-redis 4 (4.0.0 and 4.7.1) a createCluster client answered a release with MOVED in the suite; 5.0.0 passes it',
  },
  mongodb: {
    range: '^6.0.0 || ^7.0.0',
    oldest: '6.0.0',
    pages: ['docs/providers/mongodb.md'],
    tests: ['test/providers/mongodb'],
    why: '6.0 made findOneAndUpdate resolve to the document (5 resolved to a ModifyResult, which the provider also reads)',
  },
  '@aws-sdk/client-dynamodb': {
    range: '^3.699.0',
    oldest: '3.699.0',
    pages: ['docs/providers/dynamodb.md'],
    tests: ['test/providers/dynamodb'],
    why: '3.0.0 does not take requestHandler options as a plain object (the CLI and the docs pass { connectionTimeout, requestTimeout }); 3.699 is the DynamoDB release of the S3 floor (there is no 3.700.0 of it)',
  },
  '@aws-sdk/client-s3': {
    range: '^3.700.0',
    oldest: '3.700.0',
    pages: ['docs/providers/s3.md'],
    tests: ['test/providers/s3'],
    why: 'PutObject sends IfMatch from 3.700.0 (IfNoneMatch from 3.651): an older client silently drops the condition',
  },
  '@azure/storage-blob': {
    range: '^12.26.0',
    oldest: '12.26.0',
    pages: ['docs/providers/azure-blob.md'],
    tests: ['test/providers/azure-blob'],
    why: '12.0.0 reports a missing container as another error (the provider cannot say to create it); 12.26 passes the suite',
  },
  '@google-cloud/firestore': {
    range: '^8.7.1',
    oldest: '8.7.1',
    pages: ['docs/providers/firestore.md'],
    tests: ['test/providers/firestore'],
    why: 'the release the provider was written and tested on (Firestore emulator 1.19.9); older releases, 7.x included, were not installed here, so they are not claimed',
  },
  '@google-cloud/datastore': {
    range: '^10.1.1',
    oldest: '10.1.1',
    pages: ['docs/providers/datastore.md'],
    tests: ['test/providers/datastore'],
    why: 'the release the provider was written and tested on (Datastore emulator 2.3.1); older releases, 9.x included, were not installed here, so they are not claimed',
  },
  '@google-cloud/spanner': {
    range: '^8.13.0',
    oldest: '8.13.0',
    pages: ['docs/providers/spanner.md'],
    tests: ['test/providers/spanner'],
    why: 'the release the provider was written and tested on (Spanner emulator 1.5.28, with GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS=false); 9.x was not installed here, so it is not claimed',
  },
  etcd3: {
    range: '^1.0.1',
    oldest: '1.0.1',
    pages: ['docs/providers/etcd.md'],
    tests: ['test/providers/etcd'],
    why: 'the 1.x line (1.0.1 is its first release)',
  },
  'node-zookeeper-client': {
    range: '^1.1.0',
    oldest: '1.1.0',
    pages: ['docs/providers/zookeeper.md'],
    tests: ['test/providers/zookeeper'],
    why: 'removeRecursive (the tests clean up with it) came in 1.1.0; the provider itself passed on 1.0.0',
  },
  '@nats-io/kv': {
    range: '^3.0.0',
    oldest: '3.0.0',
    pages: ['docs/providers/nats.md'],
    tests: ['test/providers/nats'],
    why: 'the @nats-io/* packages start at 3.0 (before: nats.js 2, a different API)',
  },
  '@nats-io/transport-node': {
    range: '^3.0.0',
    oldest: '3.0.0',
    pages: ['docs/providers/nats.md'],
    tests: ['test/providers/nats'],
    why: 'the @nats-io/* packages start at 3.0',
  },
  memjs: {
    range: '^1.3.0',
    oldest: '1.3.0',
    pages: ['docs/providers/memcached.md'],
    tests: ['test/providers/memcached'],
    why: 'the inspector and the CLI fail on memjs 1.0',
  },
  libsql: {
    range: '^0.5.1',
    oldest: '0.5.1',
    pages: ['docs/providers/sqlite.md'],
    tests: ['test/providers/sqlite'],
    why: 'the 0.5 line (0.4.0 does not install its native part on Node 20)',
  },
  '@prisma/client': {
    range: '^7.5.0',
    oldest: '7.5.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/prisma.test.ts'],
    why: '7.4.0 (and 7.0.0) fail the suite on MariaDB: the inspector\'s SELECT rejects with "Cannot serialize value of type string as Bytes"; and tx.$transaction (nested, refused by the adapter) is missing. 7.5.0 passes',
  },
  '@prisma/adapter-pg': {
    range: '^7.5.0',
    oldest: '7.5.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/prisma.test.ts'],
    why: "the release of @prisma/client's floor (Prisma's packages go together)",
  },
  '@prisma/adapter-mariadb': {
    range: '^7.5.0',
    oldest: '7.5.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/prisma.test.ts'],
    why: "the release of @prisma/client's floor (Prisma's packages go together)",
  },
  'drizzle-orm': {
    range: '>=0.34.0 <0.46.0',
    oldest: '0.34.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/drizzle.test.ts'],
    why: 'db.$client, which the adapter hands to the provider, appeared in 0.34.0 (0.33.0 has none); 0.45 is the newest tested, and each 0.x minor may break',
  },
  kysely: {
    range: '>=0.26.0 <0.29.0',
    oldest: '0.26.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/kysely.test.ts'],
    why: '0.26 (mid-2023) passes the suite (db.startTransaction(), whose handle the tests refuse, came in 0.28); 0.28 is the newest tested, and each 0.x minor may break',
  },
  knex: {
    range: '^2.0.0 || ^3.0.0',
    oldest: '2.0.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/knex.test.ts'],
    why: 'the 2.x and 3.x lines; 2.0.0 passes the suite',
  },
  typeorm: {
    range: '^0.3.0 || ^1.0.0',
    oldest: '0.3.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/typeorm.test.ts'],
    why: 'the DataSource API the adapter takes came in 0.3.0, which passes the suite',
  },
  sequelize: {
    range: '^6.1.0',
    oldest: '6.1.0',
    pages: ['docs/orm.md'],
    tests: ['test/orm/sequelize.test.ts'],
    why: 'the 6.x line; 6.1.0 passes the suite (6.0.0 could not be installed from the registry mirror, so it is not claimed)',
  },
  '@mikro-orm/core': {
    range: '^6.0.5',
    oldest: '6.0.5',
    pages: ['docs/orm.md'],
    tests: ['test/orm/mikro-orm.test.ts'],
    why: 'the 6.x line; 6.0.5 is the first release of all three packages on the registry CI installs from (it has no @mikro-orm/mysql 6.0.0), and passes the suite; MikroORM 7 is not tested',
  },
  '@mikro-orm/postgresql': {
    range: '^6.0.5',
    oldest: '6.0.5',
    pages: ['docs/orm.md'],
    tests: ['test/orm/mikro-orm.test.ts'],
    why: "the release of @mikro-orm/core's floor",
  },
  '@mikro-orm/mysql': {
    range: '^6.0.5',
    oldest: '6.0.5',
    pages: ['docs/orm.md'],
    tests: ['test/orm/mikro-orm.test.ts'],
    why: "the release of @mikro-orm/core's floor",
  },
}
