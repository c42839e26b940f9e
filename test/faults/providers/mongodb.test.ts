import { describe } from 'vitest'
import { badLockNames } from '../support/bad-input.ts'
import { clockSkew, taskOutlivesLock } from '../support/fault-groups.ts'
import { mongodbUnderTest } from '../support/stores.ts'

// No MongoDB server can run here: the in-memory fake of the driver's Collection
// (test/helpers/fake-mongo-collection.ts) stands in, so only the groups that run inside one
// process apply. Kills, restarts, network cuts and the soak need a real server.
describe('mongodb (in-memory fake)', () => {
  const mongodb = mongodbUnderTest()
  const sut = () => mongodb
  clockSkew(sut)
  taskOutlivesLock(sut)
  badLockNames(sut)
})
