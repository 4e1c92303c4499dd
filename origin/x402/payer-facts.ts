/**
 * What verification reads from the chain of a payment (issue 13 item 3): whether the
 * authorization's (from, nonce) is used (`authorizationState` on the precompile) and the payer's
 * balance. Payments verified together share one JSON-RPC batch, two calls each, so a burst of
 * payments costs the origin and the node one round trip rather than one per payment.
 */
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import type { Hex } from "../../shared/hex.ts";
import { authorizationStateCalldata } from "../../shared/native-transfer-auth.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { createBatcher } from "../db/batcher.ts";

export type PayerFacts = { nonceUsed: boolean; balanceWei: bigint };

/** Undefined when the chain did not answer (or answered something that is not a quantity). */
export type PayerFactsReader = (payer: Hex, nonce: Hex) => Promise<PayerFacts | undefined>;

export function createPayerFactsReader(rpc: JsonRpcUpstream): PayerFactsReader {
  const read = createBatcher<{ payer: Hex; nonce: Hex }, PayerFacts | undefined>(
    async (items) => {
      const answer = await rpc.send(
        items.flatMap(({ payer, nonce }, n) => [
          {
            jsonrpc: "2.0",
            id: 2 * n,
            method: "eth_call",
            params: [
              { to: NATIVE_TRANSFER_AUTH_ADDRESS, data: authorizationStateCalldata(payer, nonce) },
              "latest",
            ],
          },
          { jsonrpc: "2.0", id: 2 * n + 1, method: "eth_getBalance", params: [payer, "latest"] },
        ]),
      );
      if (!answer.ok || !Array.isArray(answer.body)) return items.map(() => undefined);
      const byId = new Map(
        (answer.body as { id?: unknown; result?: unknown }[]).map((item) => [item.id, item.result]),
      );
      return items.map((_, n) => {
        const used = byId.get(2 * n);
        const balance = byId.get(2 * n + 1);
        if (typeof used !== "string" || !/^0x[0-9a-fA-F]*$/.test(used)) return undefined;
        if (typeof balance !== "string" || !/^0x[0-9a-fA-F]+$/.test(balance)) return undefined;
        return { nonceUsed: BigInt(used === "0x" ? "0x0" : used) !== 0n, balanceWei: BigInt(balance) };
      });
    },
    { maxBatch: 64, maxInFlight: 2 },
  );
  return (payer, nonce) => read({ payer, nonce });
}
