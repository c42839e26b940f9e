import { describe } from 'vitest'
import { inMemoryLockProvider } from '../../../src/providers/in-memory/provider.ts'
import { inMemoryRunLedger } from '../../../src/providers/in-memory/run-ledger.ts'
import { runLedgerSuite } from '../../../src/testing/index.ts'
import { registerRunLedgerSuite } from '../../support/register-suite.ts'

describe('inMemoryRunLedger', () => {
  registerRunLedgerSuite(runLedgerSuite({ ledger: inMemoryRunLedger({ keep: 5 }), keep: 5, provider: () => inMemoryLockProvider() }))
})
