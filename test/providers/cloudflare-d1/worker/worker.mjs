// A Worker that runs one task under shedlock with the D1 provider on each Cron Trigger, as an app
// would deploy it. workers.test.ts runs several copies of it, each in its own isolate, on one D1
// database. It imports the built package (dist/): workerd loads its ES modules as they are.
import { createLockingTaskExecutor } from '../../../../dist/index.js'
import { d1LockProvider } from '../../../../dist/providers/cloudflare-d1/index.js'

export default {
  /**
   * env.DB: the D1 binding; env.NODE: this copy's name. The task records the run in `runs` and
   * takes `env.HOLD_MS`, so that the copies' ticks overlap. With env.SLOTS, each tick is a slot
   * (its scheduled time): it runs once, whenever the copies fire. env.LOCK: the lock's name.
   */
  async scheduled(controller, env) {
    const executor = createLockingTaskExecutor(d1LockProvider({ database: env.DB, lockedBy: env.NODE }))
    const tick = new Date(controller.scheduledTime)
    const result = await executor.executeWithLock(
      async () => {
        await env.DB.prepare('INSERT INTO runs (tick, node) VALUES (?, ?)').bind(tick.toISOString(), env.NODE).run()
        await new Promise((resolve) => setTimeout(resolve, Number(env.HOLD_MS)))
      },
      { name: env.LOCK, lockAtMostFor: '30s', ...(env.SLOTS === 'yes' ? { slot: tick } : {}) },
    )
    await env.DB.prepare('INSERT INTO outcomes (tick, node, executed, reason) VALUES (?, ?, ?, ?)')
      .bind(tick.toISOString(), env.NODE, result.executed ? 1 : 0, result.executed ? '' : result.reason)
      .run()
  },
}
