import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../../devnet/testing.ts";
import { useRpcCutProxy } from "../../../testing/fault-scenario.ts";
import type { TestOrigin } from "../../../testing/origin.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "../../../testing/x402-payer.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";

// The settler's mined nonce is read from the chain while a batch claims its payments (settle.ts),
// in one JSON-RPC batch with the payments' facts. When that read fails, the claims must roll back:
// nothing claimed, nothing signed, and the same payment presented again settles. The failure comes
// from a FAKE: a JSON-RPC pass-through to the real devnet that answers 503 to requests calling
// eth_getTransactionCount while they are withheld. Only that batch asks for it; the fee quote and
// the payment's facts go through, so the refusal (chain_unavailable, as the chain not answering
// is named) can come from nowhere else.
const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 120_000 });
const proxy = useRpcCutProxy(() => stack.devnet.url);
// The stack closes its origins, this one too.
let origin: TestOrigin;

beforeAll(async () => {
  origin = await stack.startOrigin({}, undefined, proxy.url);
}, 120_000);

describe("x402 settlement when the chain does not say the settler's nonce", () => {
  it("refuses with chain_unavailable, claims and signs nothing, and the same payment settles later", async () => {
    const demo = `${origin.base}/x402/demo`;
    const payer = await fundedPayer(stack.devnet.url);
    const header = paymentHeader(await envelope(demo, payer));
    const settlerTransactions = async () =>
      (
        await queryRows<{ n: number }>(
          stack.db.handle.db,
          sql`select count(*)::int as n from outgoing_transactions where purpose = 'settlement'`,
        )
      )[0]!.n;
    const signedBefore = await settlerTransactions();

    proxy.withhold("eth_getTransactionCount");
    const refused = await pay(demo, header);
    proxy.withhold(undefined);
    expect(proxy.withheld).toBeGreaterThan(0);
    expect(refused.status).toBe(402);
    expect(refused.body.error).toBe(X402_REASONS.chainUnavailable);
    const rows = await queryRows<{ status: string }>(
      stack.db.handle.db,
      sql`select status from x402_settlements where payer = ${payer.address.toLowerCase()}`,
    );
    expect(rows).toEqual([]);
    expect(await settlerTransactions()).toBe(signedBefore);

    const again = await pay(demo, header);
    expect(again.status).toBe(200);
    expect(await settlerTransactions()).toBe(signedBefore + 1);
  });
});
