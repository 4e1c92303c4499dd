import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { mineForeignTransferAtNonceZero } from "../../testing/foreign-transfer.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { TestOrigin } from "../../testing/origin.ts";
import { startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// A sender's key used elsewhere (docs/operations.md: "the key was used elsewhere, which is an
// incident"): a transaction the origin did not store is mined at the nonce of one it did. The
// origin's transaction can never be mined; the chain has decided, and the tracker ends it `failed`
// once the nonce has been seen passed, none of the service's mined there, for `decideAfterMs`
// (docs/architecture.md#who-decides-a-transactions-end). Real processes; the pass-through only runs
// the other signer's broadcast just before it forwards the origin's (beforeNextSend, no fake).

describe("a nonce taken by a transaction the service did not store (real processes)", () => {
  const stack = useMoneyStack({ tracker: { periodMs: 3_600_000 } }, { timeoutMs: 120_000 });
  const proxy = useFixture(
    "pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (passing) => passing.close(),
    { timeoutMs: 120_000 },
  );
  let origin: TestOrigin;
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    // The tracker sends an unknown answer again every half second, and decides after three.
    origin = await stack.startOrigin(
      {},
      { periodMs: 100, signedGraceMs: 500, decideAfterMs: 3_000 },
      proxy.url,
    );
    chain = publicClientFor(stack.devnet.url);
  }, 120_000);

  it("ends the transfer failed once its nonce has stayed passed for decideAfterMs, though each resend is answered nonce too low; nothing moved", async () => {
    // Mutation: a broadcast's record clearing nonce_passed_at (each resend, "nonce too low", is
    // one) restarts the wait every half second, and the transfer stays `submitted` for good.
    const agent = await stack.newAgent({ units: 5_000_000n });
    const recipient = newAccount().address;
    const elsewhere = newAccount().address;
    // The same key signs another transfer at nonce 0 over the enclave's socket (as a compromised
    // origin would), mined just before the origin's transfer reaches the chain.
    const tookNonce = proxy.beforeNextSend(async () => {
      await mineForeignTransferAtNonceZero({ signer: stack.signer, chain, agent, to: elsewhere });
    });
    const calls = agentCalls(origin.base, agent.token);
    const answer = await calls.transfer({ idempotency_key: newKey(), to: recipient, amount: "2000000" });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    await tookNonce;
    const actionId = (answer.body as ActionView).action_id;
    const ended = await calls.settled(actionId, 20_000);
    expect(ended).toMatchObject({ status: "failed", error_code: "broadcast_refused" });
    const [row] = await queryRows<{ status: string; error: string; attempts: string }>(
      stack.db.handle.db,
      sql`select status, error, broadcast_attempts::text as attempts from outgoing_transactions
          where sender = ${agent.wallet.toLowerCase()}`,
    );
    expect(row).toMatchObject({ status: "failed" });
    expect(row!.error).toContain("did not sign");
    // It was sent again meanwhile (each answered nonce too low): the resends did not hold it up.
    expect(Number(row!.attempts)).toBeGreaterThan(2);
    expect(await chain.getBalance({ address: recipient })).toBe(0n);
    expect(await chain.getBalance({ address: elsewhere })).toBe(1_000n * WEI_PER_UNIT);
  }, 60_000);
});
