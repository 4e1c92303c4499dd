/**
 * A fault injector: a JSON-RPC pass-through (to the devnet, or another pass-through) that garbles
 * the answers to receipt reads the way a broken load balancer does. `unanswered`: every
 * eth_getTransactionReceipt is answered with an error (a node that cannot read receipts for a
 * while). `rotatedIds`: a batch of two or more receipt reads is answered with each call's id on the
 * next call's answer (a balancer that split the batch over its nodes and put it back together with
 * the ids out of step), so the items' contents are the devnet's own and every id appears once, but
 * no item answers the call its id names. A node's garbled batch cannot be produced on demand, so this is a fake, named as such.
 * Everything else passes through unchanged. Loopback only.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { startLoopbackServer } from "./loopback-server.ts";

type RpcRequest = { jsonrpc: "2.0"; id: unknown; method: string; params?: unknown[] };

export type ReceiptIdsMode = "through" | "unanswered" | "rotatedIds";

export type RpcReceiptIdsProxy = {
  url: string;
  /** How receipt reads are answered from now on. */
  setMode(mode: ReceiptIdsMode): void;
  /** Batches of receipt reads answered with their ids out of step (`rotatedIds`) so far. */
  readonly garbled: number;
  close(): Promise<void>;
};

const RECEIPT = "eth_getTransactionReceipt";

export async function startRpcReceiptIdsProxy(targetUrl: string): Promise<RpcReceiptIdsProxy> {
  let mode: ReceiptIdsMode = "through";
  let garbled = 0;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString();
    const parsed = JSON.parse(body) as RpcRequest | RpcRequest[];
    const requests = Array.isArray(parsed) ? parsed : [parsed];
    const receiptsOnly = requests.every((item) => item.method === RECEIPT);
    // Batches that mix receipt reads with other calls are not what these faults are about: they pass.
    if (mode === "unanswered" && receiptsOnly) {
      const answers = requests.map((item) => ({
        jsonrpc: "2.0",
        id: item.id,
        error: { code: -32000, message: "receipts unavailable" },
      }));
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
      return;
    }
    if (mode === "rotatedIds" && Array.isArray(parsed) && requests.length >= 2 && receiptsOnly) {
      const answer = await fetch(targetUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      const items = (await answer.json()) as Array<{ id: unknown }>;
      const byId = new Map(items.map((item) => [item.id, item]));
      // The devnet's own answers, in the order asked, each now naming the call before it.
      const relabelled = requests.map((item, index) => ({
        ...byId.get(requests[(index + 1) % requests.length]!.id),
        id: item.id,
      }));
      garbled++;
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(relabelled));
      return;
    }
    return forwardAs(body, response);
  };

  const forwardAs = async (body: string, response: ServerResponse): Promise<void> => {
    const answer = await fetch(targetUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    const text = await answer.text();
    response.writeHead(answer.status, { "content-type": "application/json" });
    response.end(text);
  };

  const server = await startLoopbackServer(handle);
  return {
    url: server.url,
    setMode: (next) => {
      mode = next;
    },
    get garbled() {
      return garbled;
    },
    close: () => server.close(),
  };
}
