/**
 * The outbox's money checks weigh a payment against a funding exception only while it stands: a
 * revoked exception is no longer a ceiling (funding/gate.ts), so the batch neither locks it
 * (lockCeilingsStatement: payments into its wallet do not queue behind each other across origins
 * for it) nor reads what is in flight to its wallet (factsStatement's `incoming`). A wallet with a
 * standing exception beside the revoked one has only the standing one locked.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { runPrepared } from "../db/prepared.ts";
import { grantException, revokeException } from "../funding/exceptions.ts";
import { factsStatement, lockCeilingsStatement } from "./batch-store.ts";

describe("a revoked funding exception in the outbox's money checks", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const wallet = () => `0x${randomBytes(20).toString("hex")}`;
  const grant = async (to: string): Promise<string> => {
    const granted = await grantException(testDb.handle.db, {
      wallet: to,
      ceilingUnits: 5_000_000n,
      expiresAt: new Date(Date.now() + 3_600_000),
      reason: "drill pending",
    });
    if (!granted.ok) throw new Error(granted.error.message);
    return granted.value.id;
  };
  const revoke = async (id: string) => {
    const revoked = await revokeException(testDb.handle.db, { id, reason: "drill done" });
    if (!revoked.ok) throw new Error(revoked.error.message);
  };

  it("is neither locked nor read for its wallet; a standing one beside it is", async () => {
    const revokedOnly = wallet();
    await revoke(await grant(revokedOnly));
    const both = wallet();
    await revoke(await grant(both));
    const standing = await grant(both);
    const recipients = `{${revokedOnly},${both}}`;

    const locked = await testDb.handle.db.transaction((tx) =>
      runPrepared(tx, lockCeilingsStatement, { recipients }),
    );
    // Mutation: without `revoked_at is null` both revoked rows are locked too.
    expect(locked.map((row) => row.id)).toEqual([standing]);

    const [facts] = await runPrepared(testDb.handle.db, factsStatement, {
      mined: "[]",
      transferAgents: "{}",
      day: "2031-05-15",
      monthStart: "2031-05-01",
      faucetAgents: "{}",
      dayStart: "2031-05-15T00:00:00.000Z",
      at: new Date().toISOString(),
      wallets: "{}",
      recipients,
    });
    // Mutation: without `revoked_at is null` the revoked-only wallet is read too ("0").
    expect(facts?.incoming).toEqual({ [both]: "0" });
  });
});
