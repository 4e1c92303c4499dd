/** Reading the answers of a JSON-RPC batch sent through json-rpc-upstream.ts. */
import type { UpstreamResult } from "./json-rpc-upstream.ts";

/**
 * A batch answer's results by request id. Empty when the call failed or the answer is no batch;
 * an item that answered an error has no result (undefined), as one the node left out.
 */
export function batchResults(answer: UpstreamResult): Map<unknown, unknown> {
  if (!answer.ok || !Array.isArray(answer.value)) return new Map();
  return new Map(
    (answer.value as { id?: unknown; result?: unknown }[]).map((item) => [item?.id, item?.result]),
  );
}

/** A JSON-RPC QUANTITY: 0x and 1 to 64 hex digits. */
export function isQuantity(value: unknown): value is string {
  return typeof value === "string" && /^0x[0-9a-fA-F]{1,64}$/.test(value);
}
