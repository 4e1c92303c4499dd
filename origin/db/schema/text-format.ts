import { type SQL, sql } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";

/** What a text column holds: a fixed prefix, then characters of one class, so many of them. */
export type TextFormat = {
  prefix?: string;
  /** A regex bracket expression, such as `[0-9a-f]`. */
  chars: string;
  /** The number of characters after the prefix: exactly, or `[min, max]`. */
  count: number | readonly [number, number];
};

/**
 * A CHECK expression for a text column of `format`, written as the column's length and an
 * unbounded repetition of its class rather than as a counted one (`[0-9a-f]{64}`): Postgres's
 * regex engine runs a counted repetition about 14 times slower (7 µs against 0.5 µs for a
 * 66-character hash here), and a table's checks run on every insert and every update of its rows
 * (docs/performance.md, "Provisioning and the key pool"). Both forms accept exactly the same
 * strings, and a null passes either (origin/db/text-format.int.test.ts).
 */
export function textFormat(column: AnyPgColumn, format: TextFormat): SQL {
  const prefix = format.prefix ?? "";
  const [min, max] = typeof format.count === "number" ? [format.count, format.count] : format.count;
  const length =
    min === max
      ? sql`char_length(${column}) = ${sql.raw(String(prefix.length + min))}`
      : sql`char_length(${column}) between ${sql.raw(String(prefix.length + min))} and ${sql.raw(String(prefix.length + max))}`;
  return sql`${length} and ${column} ~ ${sql.raw(`'^${prefix}${format.chars}*$'`)}`;
}

/** `0x` and 40 lowercase hex digits: an address as the database keeps it. */
export const LOWER_ADDRESS: TextFormat = { prefix: "0x", chars: "[0-9a-f]", count: 40 };
/** `0x` and 64 lowercase hex digits: a hash or a 32-byte nonce. */
export const LOWER_HASH: TextFormat = { prefix: "0x", chars: "[0-9a-f]", count: 64 };
/** 64 lowercase hex digits without a prefix: a key ref, a SHA-256 token hash. */
export const LOWER_HEX_64: TextFormat = { chars: "[0-9a-f]", count: 64 };
