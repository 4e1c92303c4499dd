/**
 * A UUID as Postgres writes one: lowercase hex, 8-4-4-4-12. Every id this service hands out (agents,
 * actions, settlements, batches, webhook endpoints) has this form, so a value of any other shape
 * names nothing; checking it before a query is what keeps a `::uuid` cast from failing the query.
 */
export const UUID_SOURCE = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

const UUID_PATTERN = new RegExp(`^${UUID_SOURCE}$`);

/** Whether `value` is exactly a lowercase UUID (no braces, no surrounding space, no uppercase). */
export function isUuid(value: string): boolean {
  return UUID_PATTERN.test(value);
}
