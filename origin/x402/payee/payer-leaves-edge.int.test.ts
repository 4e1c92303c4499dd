import type { Address } from "viem";
import { describe, it } from "vitest";
import { newAccount } from "../../../devnet/testing.ts";
import { startTestEdge } from "../../../testing/edge.ts";
import type { TestOrigin } from "../../../testing/origin.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { payerLeavesWhileMined, retryLeavesWhilePending } from "../../../testing/x402-payer-leaves.ts";

// A payer of the demo that leaves before its paid answer, through the edge (the worker in
// Miniflare behind its local front, dev/edge.ts), every part real: the edge's request to the origin
// must end with its client's, so that the origin sees the caller gone and keeps the paid answer
// owed to the payer's retry, as x402-faults.int.test.ts shows straight at the origin.
const EDGE_SECRET = "payer-leaves-edge-secret-0123456789abcdef0123456789";
const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

describe("a payer through the edge that leaves before its paid answer", () => {
  // The stack's own origin shares the database; its tracker is slowed right down so that the
  // origin each test starts is the one that finishes the settlement (as in x402-faults).
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo },
      env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
      tracker: { periodMs: 3_600_000 },
    },
    { timeoutMs: 120_000 },
  );

  /** An origin with `env` and an edge in front of it; both stopped after `run`. */
  const throughEdge = async (
    env: Record<string, string>,
    run: (demo: string, origin: TestOrigin) => Promise<void>,
  ): Promise<void> => {
    const origin = await stack.startOrigin(env, { periodMs: 100 });
    try {
      const edge = await startTestEdge({
        originUrl: origin.url,
        edgeSharedSecret: EDGE_SECRET,
        onLine: () => {},
      });
      try {
        await run(`${edge.url}/77/x402/demo`, origin);
      } finally {
        await edge.stop();
      }
    } finally {
      await origin.close();
    }
  };

  const scene = (demo: string) => ({ demo, devnetUrl: stack.devnet.url, db: stack.db.handle.db });

  it("leaving while its settlement is mined takes no paid answer: the retry through the edge is paid, once, and the next told the nonce is used", async () => {
    // Before the fix the edge's request to the origin went on after the payer's fetch was aborted
    // (the local front's cut reached workerd as a FIN, which it does not notice for a request whose
    // body it has whole), so the origin answered paid to nobody and the retry was told
    // invalid_exact_evm_nonce_already_used: paid, and nothing delivered.
    await throughEdge({ AGENT_X402_RECEIPT_TIMEOUT_MS: "30000" }, async (demo) => {
      await payerLeavesWhileMined(scene(demo));
    });
  }, 120_000);

  it("a retry of a pending payment that leaves while it waits for the settlement takes no paid answer: the next retry through the edge is paid, once", async () => {
    await throughEdge({ AGENT_X402_RECEIPT_TIMEOUT_MS: "1500" }, async (demo) => {
      await retryLeavesWhilePending(scene(demo));
    });
  }, 120_000);
});
