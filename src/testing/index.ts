export { type LockProviderSuiteOptions, type LockProviderTestCase, lockProviderSuite } from './provider-suite.ts'
export { runLocked } from './run-locked.ts'
