// The outbox is the one module that writes the service's own transactions and its senders'
// nonces: a statement writing either table anywhere else in the origin's programs would be a second
// pipeline beside it (another signing order, another refusal rule). Tests may write them to set
// up a scene; the programs may not.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const origin = path.resolve(import.meta.dirname, "..");
const outbox = path.join(origin, "outbox");

/** SQL that writes one of the outbox's tables: insert into, update, delete from. */
const WRITES = /\b(?:insert\s+into|update|delete\s+from)\s+(outgoing_transactions|sender_nonces)\b/gi;

function programFiles(): string[] {
  return readdirSync(origin, { recursive: true, encoding: "utf8" })
    .map((name) => path.join(origin, name))
    .filter(
      (file) => file.endsWith(".ts") && !file.endsWith(".test.ts") && !file.startsWith(outbox + path.sep),
    );
}

describe("the outbox owns the outgoing transactions", () => {
  it("finds program files outside origin/outbox/ to scan", () => {
    expect(programFiles().length).toBeGreaterThan(50);
  });

  it("no program file outside origin/outbox/ writes outgoing_transactions or sender_nonces", () => {
    const writers = programFiles().flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(WRITES)].map(
        (match) => `${path.relative(origin, file)}: ${match[0].replace(/\s+/g, " ")}`,
      ),
    );
    expect(writers).toEqual([]);
  });
});
