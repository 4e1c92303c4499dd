/**
 * The format checks of migration 0033 (schema/text-format.ts) are a length and an unbounded
 * repetition instead of one counted regex, which Postgres runs far slower. Each must still accept
 * exactly what its counted regex accepted: every check, as the migrated database holds it, is run
 * over the same strings as that regex, by Postgres, and the verdicts compared.
 */
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { queryRows } from "./client.ts";

/** Each check named by its constraint, with the counted regex it stands for (before 0033). */
const COUNTED_REGEXES: Record<string, string> = {
  agent_identities_wallet_format: "^0x[0-9a-f]{40}$",
  agent_identities_key_ref_format: "^[0-9a-f]{64}$",
  agent_tokens_token_id_format: "^[0-9a-f]{32}$",
  key_pool_key_ref_format: "^[0-9a-f]{64}$",
  key_pool_address_format: "^0x[0-9a-f]{40}$",
  operator_passkeys_public_key_format: "^0x04[0-9a-f]{128}$",
  operator_sessions_token_hash_format: "^[0-9a-f]{64}$",
  outgoing_transactions_sender_format: "^0x[0-9a-f]{40}$",
  outgoing_transactions_hash_format: "^0x[0-9a-f]{64}$",
  sender_nonces_address_format: "^0x[0-9a-f]{40}$",
  x402_payment_ids_payer_format: "^0x[0-9a-f]{40}$",
  x402_payment_ids_id_format: "^[A-Za-z0-9_-]{16,128}$",
  x402_payment_ids_nonce_format: "^0x[0-9a-f]{64}$",
  x402_settlements_payer_format: "^0x[0-9a-f]{40}$",
  x402_settlements_nonce_format: "^0x[0-9a-f]{64}$",
};

/** Strings at and around what `regex` accepts: its valid values, then each one bent a little. */
function candidates(regex: string): string[] {
  const [, prefix, chars, counts] = /^\^([^[]*)\[([^\]]+)\]\{([0-9,]+)\}\$$/.exec(regex)!;
  const alphabet = chars!.includes("A-Z")
    ? "ABCXYZabcxyz0189_-"
    : chars!.includes("a-f")
      ? "0123456789abcdef"
      : "";
  const lengths = counts!.split(",").map(Number);
  const valid = lengths.map((length) =>
    Array.from(randomBytes(length), (byte) => alphabet[byte % alphabet.length]).join(""),
  );
  const bent = valid.flatMap((body) => {
    const value = `${prefix}${body}`;
    const positions = [0, 1, 2, prefix!.length, Math.floor(value.length / 2), value.length - 1];
    const swaps = ["A", "F", "g", "x", "X", "-", "_", ".", " ", "\n", "é", "0"];
    return [
      value,
      `${value}\n`,
      `${value}0`,
      `${value}a`,
      value.slice(0, -1),
      value.slice(1),
      `\n${value}`,
      ` ${value}`,
      value.toUpperCase(),
      `0X${value.slice(2)}`,
      `${prefix}${body}${body}`,
      ...positions.flatMap((at) => swaps.map((swap) => `${value.slice(0, at)}${swap}${value.slice(at + 1)}`)),
    ];
  });
  return [...bent, "", prefix!, "0x", `${prefix}${"0".repeat(300)}`];
}

describe("the format checks of migration 0033", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it("holds every counted-regex format check, under its name, and no other", async () => {
    const rows = await queryRows<{ name: string; definition: string }>(
      testDb.handle.db,
      sql`select conname as name, pg_get_constraintdef(oid) as definition from pg_constraint
          where contype = 'c' and pg_get_constraintdef(oid) ~ '\\{[0-9,]+\\}'`,
    );
    // No check left with a counted repetition; the formats below are all still there.
    expect(rows).toEqual([]);
    const names = await queryRows<{ name: string }>(
      testDb.handle.db,
      sql`select conname as name from pg_constraint where contype = 'c' and conname like '%format'`,
    );
    expect(names.map((row) => row.name).sort()).toEqual(
      [...Object.keys(COUNTED_REGEXES), "operator_passkeys_credential_id_format"].sort(),
    );
  });

  it("accepts exactly what each counted regex accepted, and passes a null as it did", async () => {
    for (const [name, regex] of Object.entries(COUNTED_REGEXES)) {
      const [check] = await queryRows<{ expression: string; column: string }>(
        testDb.handle.db,
        sql`select pg_get_expr(c.conbin, c.conrelid) as expression, a.attname as column
            from pg_constraint c join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
            where c.conname = ${name}`,
      );
      expect(check, name).toBeDefined();
      const values = candidates(regex);
      const verdicts = await queryRows<{
        value: string | null;
        check: boolean | null;
        counted: boolean | null;
      }>(
        testDb.handle.db,
        sql`select ${sql.identifier(check!.column)} as value,
              (${sql.raw(check!.expression)}) as check,
              ${sql.identifier(check!.column)} ~ ${regex} as counted
            from unnest(${sql.param([...values, null])}::text[]) as t(${sql.identifier(check!.column)})`,
      );
      expect(verdicts).toHaveLength(values.length + 1);
      const disagreements = verdicts.filter((row) => row.check !== row.counted);
      expect(disagreements, name).toEqual([]);
      // The samples reach both verdicts, so the comparison is not vacuous.
      expect(new Set(verdicts.map((row) => row.counted)), name).toEqual(new Set([true, false, null]));
    }
  });
});
