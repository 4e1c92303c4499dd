/**
 * Statements the hot paths run many times a second (money actions, receipts, the tracker), sent
 * by name: Postgres parses and plans each once per connection, then reuses the plan, instead of
 * doing both on every call (for the larger statements, planning cost more than running). The
 * driver call also skips drizzle's per-query set-up. The text is fixed when the module loads; only
 * the values change, which is what a named statement requires.
 */
import { Placeholder, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type { Db } from "./client.ts";

export type PreparedStatement<P extends string> = {
  readonly name: string;
  readonly text: string;
  /** Each positional parameter: a placeholder's name, or a value fixed in the template. */
  readonly params: readonly ({ placeholder: P } | { fixed: unknown })[];
};

const dialect = new PgDialect();

/**
 * A named statement from a drizzle `sql` template: its variable parts are
 * `sql.placeholder(name)`; anything else interpolated is a constant sent with every run.
 */
export function preparedStatement<P extends string>(name: string, query: SQL): PreparedStatement<P> {
  const compiled = dialect.sqlToQuery(query);
  const params = compiled.params.map((param) =>
    param instanceof Placeholder ? { placeholder: param.name as P } : { fixed: param },
  );
  return { name, text: compiled.sql, params };
}

/** A pg (or Neon) pool or connection. */
export type Queryable = {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
};

/**
 * The driver's own client behind `db`: its pool, or the connection of the transaction `db` belongs
 * to (drizzle keeps either as its session's client, for both drivers).
 */
export function driverClient<C>(db: Db): C {
  return (db as unknown as { session: { client: C } }).session.client;
}

/** Runs `statement` with `values` on `db` (the pool, or its transaction's connection). */
export function runPrepared<T, P extends string>(
  db: Db,
  statement: PreparedStatement<P>,
  values: Record<P, unknown>,
): Promise<T[]> {
  return queryPrepared(driverClient<Queryable>(db), statement, values);
}

/** Runs `statement` with `values` on a pool or connection of the driver's own. */
export async function queryPrepared<T, P extends string>(
  client: Queryable,
  statement: PreparedStatement<P>,
  values: Record<P, unknown>,
): Promise<T[]> {
  const result = await client.query({
    name: statement.name,
    text: statement.text,
    values: statement.params.map((param) =>
      "placeholder" in param ? values[param.placeholder] : param.fixed,
    ),
  });
  return result.rows as T[];
}
