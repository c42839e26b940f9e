/**
 * NestJS + @nestjs/schedule + @shedlock/nestjs on PostgreSQL: the @Cron job runs on one process
 * each second, the others skip it. The lock provider is built by ShedLockModule.forRootAsync from
 * the application's own pg Pool.
 *
 *   npm run example nestjs-postgres        (start it in two or three terminals at once)
 *
 * Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), EXAMPLE_RUN_MS
 * (stop after this long; default: run until Ctrl+C).
 */
import 'reflect-metadata'
import { Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { Cron, ScheduleModule } from '@nestjs/schedule'
import { SchedulerLock, ShedLockModule } from '@shedlock/nestjs'
import pg from 'pg'
import { assertLocked } from 'shedlock'
import { postgresLockProvider, postgresSchema } from 'shedlock/postgres'

const PG_POOL = Symbol('PG_POOL')
const log = (message: string) => console.log(`[${process.pid}] ${new Date().toISOString().slice(11, 19)} ${message}`)

/** The application's database module: one pg Pool, created once, ended on shutdown. */
@Module({
  providers: [
    {
      provide: PG_POOL,
      useFactory: async () => {
        const pool = new pg.Pool({
          connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
          max: 4,
        })
        await pool.query(postgresSchema()) // CREATE TABLE IF NOT EXISTS shedlock (…)
        return pool
      },
    },
  ],
  exports: [PG_POOL],
})
class DatabaseModule implements OnApplicationShutdown {
  readonly #pool: pg.Pool

  constructor(@Inject(PG_POOL) pool: pg.Pool) {
    this.#pool = pool
  }

  async onApplicationShutdown(): Promise<void> {
    await this.#pool.end()
  }
}

@Injectable()
class ReportService {
  // Every second, for the demo; a real report would run at, say, '0 3 * * *'. The decorators may
  // come in either order.
  @Cron('* * * * * *', { name: 'report' })
  @SchedulerLock({ name: 'example-nestjs-report', lockAtMostFor: '1m', lockAtLeastFor: '500ms' })
  async report(): Promise<void> {
    assertLocked() // the method runs inside the lock's async context
    log('ran the report')
  }
}

@Module({
  imports: [
    ScheduleModule.forRoot(),
    DatabaseModule,
    ShedLockModule.forRootAsync({
      imports: [DatabaseModule],
      inject: [PG_POOL],
      useFactory: (pool: pg.Pool) => ({
        provider: postgresLockProvider({ client: pool }),
        defaultLockAtMostFor: '10m',
        // A skipped call never enters the method; the executor's listener sees it.
        listener: { onLockNotAcquired: (lock) => log(`skipped ${lock.name}: another process holds the lock`) },
      }),
    }),
  ],
  providers: [ReportService],
})
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['warn', 'error'] })
app.enableShutdownHooks()
if (process.env.EXAMPLE_RUN_MS) setTimeout(() => void app.close(), Number(process.env.EXAMPLE_RUN_MS))
