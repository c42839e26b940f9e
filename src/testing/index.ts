export { type LockProviderSuiteOptions, type LockProviderTestCase, lockProviderSuite } from './provider-suite.ts'
export { type RunLockedOptions, runLocked } from './run-locked.ts'
export { type LockInspectorSuiteOptions, type LockInspectorTestCase, lockInspectorSuite } from './inspector-suite.ts'
export { type RunLedgerSuiteOptions, type RunLedgerTestCase, runLedgerSuite } from './run-ledger-suite.ts'
