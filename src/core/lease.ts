import { configurationOfChecked, type LockConfiguration } from './lock-configuration.ts'

/**
 * How long the store holds a running task's lock at a time by default: 30 seconds. The executor
 * renews it every 10 s while the task runs (where the store can extend locks), so a node that
 * dies frees its task's lock within 30 s instead of after `lockAtMostFor`. See docs/slots.md.
 */
export const DEFAULT_LEASE = '30s'

/**
 * What the store is asked for when a run's lock is leased: the run's configuration with
 * `lockAtMostFor` cut to the lease (at least `lockAtLeastFor`, which the release keeps), or the
 * configuration itself when the lease would not be shorter. `leaseMs` 0: not leased.
 */
export function leasedConfiguration(configuration: LockConfiguration, leaseMs: number): LockConfiguration {
  const lease = Math.max(leaseMs, configuration.lockAtLeastFor)
  if (leaseMs <= 0 || lease >= configuration.lockAtMostFor) return configuration
  return configurationOfChecked(
    configuration.name,
    configuration.createdAt.getTime(),
    lease,
    configuration.lockAtLeastFor,
  )
}
