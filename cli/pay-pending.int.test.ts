import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Address, Hex } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount, publicClientFor, rpc } from "../devnet/testing.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { runTool } from "../testing/run-tool.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { authorizationUsedCount } from "../testing/x402-settlements.ts";

// `agent-wallet pay` whose payment's settlement is still pending when the resource answers: the bin
// in its own process against the real stack (origin, enclave, devnet, Postgres) and the demo
// resource. The origin waits 1.5 s for a settlement's receipt, and the devnet's mining is held a
// few seconds, so the first presentation is answered 402 `settlement_pending`, which asks the payer
// to present the same payment again (docs/x402.md#after-settlement_pending-retry-the-same-payment).

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;
const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
/** How long mining is held: past the origin's receipt wait, inside the client's 30 s for a pending payment. */
const MINING_HELD_MS = 5_000;

describe("agent-wallet pay answered settlement_pending (real stack)", () => {
  const stack = useMoneyStack(
    { x402: { amountUnits: AMOUNT, payTo }, env: { AGENT_X402_RECEIPT_TIMEOUT_MS: "1500" } },
    { timeoutMs: 180_000 },
  );

  // Mutation: with the CLI's node:http answer naming its buffered body `body` (cli/node-fetch.ts),
  // the client's `paid.body?.cancel()` before presenting again throws a TypeError, which the CLI
  // printed as "no answer … nothing was paid" (exit 19), no key, while the payment settled.
  it("presents the same payment again until it settles: exit 0 naming the transaction, paid once", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const chain = publicClientFor(stack.devnet.url);
    const before = await chain.getBalance({ address: agent.wallet });
    expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
    let paid: Awaited<ReturnType<typeof runTool>>;
    const resume = setTimeout(() => {
      void rpc(stack.devnet.url, "dev_setAutomine", [true]).then(() => rpc(stack.devnet.url, "dev_mine", []));
    }, MINING_HELD_MS);
    try {
      paid = await runTool(BIN, ["pay", `${stack.origin.base}/x402/demo`], {
        env: { AGENT_BASE_URL: stack.origin.base, AGENT_TOKEN: agent.token },
        cleanEnv: true,
        timeoutMs: 90_000,
      });
    } finally {
      clearTimeout(resume);
      await rpc(stack.devnet.url, "dev_setAutomine", [true]);
      await rpc(stack.devnet.url, "dev_mine", []);
    }
    expect(paid.code, `${paid.stdout}${paid.stderr}`).toBe(0);
    const printed = /^200: paid in transaction (0x[0-9a-f]{64}) on eip155:77\n/.exec(paid.stdout);
    expect(printed, paid.stdout).not.toBeNull();
    expect((await chain.getTransactionReceipt({ hash: printed![1] as Hex })).status).toBe("success");
    expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(1);
    expect(before - (await chain.getBalance({ address: agent.wallet }))).toBe(AMOUNT * WEI_PER_UNIT);
    expect(`${paid.stdout}${paid.stderr}`).not.toContain(agent.token);
  }, 180_000);
});
