import type { HostileOption } from './bad-input.ts'

const IDENTIFIER = /^[A-Za-z0-9_]+$/

/** The SQL providers' storage-naming options: `tableName` (optionally `schema.table`) and the four `columnNames`. */
export function sqlHostileOptions(
  build: (options: Record<string, unknown>, client: never) => unknown,
): HostileOption[] {
  return [
    {
      option: 'tableName',
      build: (value, client) => build({ tableName: value }, client),
      safe: (value) => value.split('.').length <= 2 && value.split('.').every((part) => IDENTIFIER.test(part)),
    },
    ...(['name', 'lockUntil', 'lockedAt', 'lockedBy'] as const).map((column) => ({
      option: `columnNames.${column}`,
      build: (value: string, client: never) => build({ columnNames: { [column]: value } }, client),
      safe: (value: string) => IDENTIFIER.test(value),
    })),
  ]
}
