/**
 * Statements the hot paths run many times a second (money actions, receipts, the tracker), sent
 * by name: Postgres parses and plans each once per connection, then reuses the plan, instead of
 * doing both on every call (for the larger statements, planning cost more than running). The
 * driver call also skips drizzle's per-query set-up. The text is fixed when the module loads; only
 * the values change, which is what a named statement requires. Each statement declares the columns
 * of its rows (docs/development.md#named-statements-declare-their-rows).
 */
import { Placeholder, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type { Db } from "./client.ts";

/**
 * What a statement's rows hold, declared beside its text: each result column by name, in order,
 * with its type tag. The rows' TypeScript type follows from it; nothing checks or converts a row
 * as it is read: origin/db/prepared.int.test.ts has Postgres describe every statement on the
 * migrated schema and compares.
 */
export type Columns = Readonly<Record<string, ColumnDeclaration>>;

/**
 * Each tag, the Postgres type its column has, as `format_type` spells it. A tag names what the
 * drivers hand over (pg and Neon alike, with their default parsers): int8 and numeric as text, so a
 * `bigint-as-text` or `numeric-as-text` column is a string to pass to BigInt.
 */
export const COLUMN_TYPES = {
  text: "text",
  uuid: "uuid",
  "bigint-as-text": "bigint",
  "numeric-as-text": "numeric",
  json: "json",
  jsonb: "jsonb",
  bool: "boolean",
  int: "integer",
  timestamptz: "timestamp with time zone",
} as const;

export type ColumnType = keyof typeof COLUMN_TYPES;

/** What each tag's column holds in a row. */
type ColumnValues = {
  text: string;
  uuid: string;
  "bigint-as-text": string;
  "numeric-as-text": string;
  json: unknown;
  jsonb: unknown;
  bool: boolean;
  int: number;
  timestamptz: Date;
};

declare const valueType: unique symbol;

/**
 * A column whose values the declaration narrows: a text column of a closed set (the schema's
 * check constraint), a json column's shape. `V` includes null when the column may be null.
 */
export type NarrowedColumn<T extends ColumnType, V> = {
  readonly type: T;
  readonly nullable: boolean;
  /** Never set: it carries the values' type. */
  readonly [valueType]?: V;
};

/** A column: its tag, with `?` after it when it may be null (`"text?"`), or a narrowed one. */
export type ColumnDeclaration = ColumnType | `${ColumnType}?` | NarrowedColumn<ColumnType, unknown>;

type ColumnValue<D> =
  D extends NarrowedColumn<ColumnType, infer V>
    ? V
    : D extends `${infer T extends ColumnType}?`
      ? ColumnValues[T] | null
      : D extends ColumnType
        ? ColumnValues[D]
        : never;

/** The row a statement declaring `C` returns. */
export type RowOf<C extends Columns> = { -readonly [K in keyof C]: ColumnValue<C[K]> };

/** Declares no columns: a statement whose rows, if any, nobody reads. */
export type NoColumns = Record<never, never>;

/** A json column holding `V` (parsed by the driver); `{ nullable: true }` when it may be null. */
export function jsonOf<V>(): NarrowedColumn<"json", V>;
export function jsonOf<V>(options: { nullable: true }): NarrowedColumn<"json", V | null>;
export function jsonOf(options?: { nullable: true }): NarrowedColumn<"json", unknown> {
  return { type: "json", nullable: options?.nullable === true };
}

/** A text column holding one of `V` (a closed set the schema's check constraint keeps). */
export function textOf<V extends string>(): NarrowedColumn<"text", V>;
export function textOf<V extends string>(options: { nullable: true }): NarrowedColumn<"text", V | null>;
export function textOf(options?: { nullable: true }): NarrowedColumn<"text", unknown> {
  return { type: "text", nullable: options?.nullable === true };
}

/** A declaration as data: the column's tag and whether it may be null. */
export function columnDeclaration(column: ColumnDeclaration): { type: ColumnType; nullable: boolean } {
  if (typeof column !== "string") return { type: column.type, nullable: column.nullable };
  const nullable = column.endsWith("?");
  return { type: (nullable ? column.slice(0, -1) : column) as ColumnType, nullable };
}

export type PreparedStatement<P extends string, C extends Columns> = {
  readonly name: string;
  readonly text: string;
  /** Each positional parameter: a placeholder's name, or a value fixed in the template. */
  readonly params: readonly ({ placeholder: P } | { fixed: unknown })[];
  /** The result columns, in order. */
  readonly columns: C;
};

const dialect = new PgDialect();

/**
 * The longest name Postgres keeps (NAMEDATALEN - 1 bytes): it cuts a longer statement name short,
 * so two names alike up to there would name one statement, and a connection holds one text per name.
 */
export const MAX_STATEMENT_NAME = 63;

/**
 * A named statement from a drizzle `sql` template: its variable parts are
 * `sql.placeholder(name)`; anything else interpolated is a constant sent with every run. It is a
 * statement once `returns` has declared its result columns (`{}`: none read). A name longer than
 * MAX_STATEMENT_NAME is refused.
 */
export function preparedStatement<P extends string>(
  name: string,
  query: SQL,
): { returns<const C extends Columns>(columns: C): PreparedStatement<P, C> } {
  if (new TextEncoder().encode(name).length > MAX_STATEMENT_NAME) {
    throw new RangeError(
      `statement name ${name} is longer than the ${MAX_STATEMENT_NAME} bytes Postgres keeps`,
    );
  }
  const compiled = dialect.sqlToQuery(query);
  const params = compiled.params.map((param) =>
    param instanceof Placeholder ? { placeholder: param.name as P } : { fixed: param },
  );
  return { returns: (columns) => ({ name, text: compiled.sql, params, columns }) };
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
export function runPrepared<P extends string, C extends Columns>(
  db: Db,
  statement: PreparedStatement<P, C>,
  values: Record<P, unknown>,
): Promise<RowOf<C>[]> {
  return queryPrepared(driverClient<Queryable>(db), statement, values);
}

/** Runs `statement` with `values` on a pool or connection of the driver's own. */
export async function queryPrepared<P extends string, C extends Columns>(
  client: Queryable,
  statement: PreparedStatement<P, C>,
  values: Record<P, unknown>,
): Promise<RowOf<C>[]> {
  const result = await client.query({
    name: statement.name,
    text: statement.text,
    values: statement.params.map((param) =>
      "placeholder" in param ? values[param.placeholder] : param.fixed,
    ),
  });
  // As declared (see Columns): the rows are not looked at here.
  return result.rows as RowOf<C>[];
}
