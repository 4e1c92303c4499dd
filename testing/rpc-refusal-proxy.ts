/**
 * A fault injector: a JSON-RPC pass-through in front of the devnet that refuses chosen
 * eth_sendRawTransaction calls, alone or inside a batch, with geth's error shape (code -32000 and
 * geth's message), or takes one and drops it (a node whose pool lets a pending transaction go), or
 * lies about one: forwards it to the devnet, which takes and mines it, and then answers with an
 * error, as real endpoints do (geth's own "request timed out" while its pool still adds the
 * transaction; a load balancer that retried the call on a node that had already mined it, "nonce
 * too low", and then reads receipts from a node that lags). Everything else passes through. A node
 * refuses or lies about a signed transaction for reasons the devnet cannot be made to produce on
 * demand at one chosen transaction (a balance that moved since the check, on another node's view; a
 * pool policy; a timeout in the middle of an add; a lagging replica), so this is the one fake of
 * these tests, named as such. `raiseBaseFeeBeforeSend` is no fake: it makes the devnet itself
 * raise the next block's base fee (dev_setNextBlockBaseFeePerGas) right before it forwards a
 * broadcast, so the devnet's own admission refuses what was quoted before; nor is
 * `beforeNextSend`, which runs a test's own step (another relayer's transaction, say) against the
 * devnet in the same instant. Loopback only.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { type Address, type Hex, keccak256, parseTransaction, recoverTransactionAddress } from "viem";
import { sleep } from "../shared/sleep.ts";
import { startLoopbackServer } from "./loopback-server.ts";

/** A broadcast as the proxy saw it. */
export type SentTransaction = { from: Address; to: Address | undefined; nonce: number; data: Hex; hash: Hex };

/** geth's words for a transaction whose sender's balance moved since it was checked. */
export const INSUFFICIENT_FUNDS_MESSAGE =
  "insufficient funds for gas * price + value: balance 0, tx cost 1, overshot 1";

/**
 * How a lying node answers a broadcast it passed on: `timeout`, geth's own -32002 "request timed
 * out"; `lagging`, "nonce too low" (a load balancer's retry reached a node that had mined it), with
 * the transaction's receipt and body then hidden for a while (read from a node that lags).
 */
export type LieMode = "timeout" | "lagging";

/** geth's answer to a call it gave up waiting for (its pool may still add the transaction). */
export const REQUEST_TIMED_OUT = { code: -32002, message: "request timed out" } as const;

export type RpcRefusalProxy = {
  url: string;
  /**
   * Refuses, once, the first broadcast `pick` chooses, answering `message` with geth's code;
   * resolves with that transaction once refused.
   */
  refuseOnce(pick: (tx: SentTransaction) => boolean, message?: string): Promise<SentTransaction>;
  /**
   * Refuses every broadcast `pick` chooses, with `message` (geth's code), until `stop()`: a node
   * whose view keeps refusing the transaction (its sender's balance spent on another node's view).
   * `first` resolves with the first one refused.
   */
  refuseEvery(
    pick: (tx: SentTransaction) => boolean,
    message?: string,
  ): { first: Promise<SentTransaction>; refused(): number; stop(): void };
  /**
   * Answers the first broadcast `pick` chooses as a node does that took it (its hash) and then
   * dropped it from its pool: nothing reaches the devnet. Resolves with it once dropped.
   */
  dropOnce(pick: (tx: SentTransaction) => boolean): Promise<SentTransaction>;
  /**
   * While set, takes every broadcast at once (answering its hash, as a node does that puts it in
   * its pool) and hands it to the devnet `ms` later, in the order taken: a node that takes its
   * time to mine. Undefined: broadcasts go straight through again.
   */
  delaySends(ms: number | undefined): void;
  /** Before it forwards the next broadcast, sets the devnet's next base fee to `wei`. */
  raiseBaseFeeBeforeSend(wei: bigint): Promise<void>;
  /** Runs `step` before it forwards the next broadcast; resolves once it has run. */
  beforeNextSend(step: () => Promise<void>): Promise<void>;
  /**
   * Lies, once, about the first broadcast `pick` chooses: forwards it to the devnet (which takes
   * and mines it), then answers `mode`'s error (LieMode). In `lagging` mode its receipt and body
   * read as not found for `hideMs` after. Resolves with the transaction once it has been forwarded.
   */
  lieOnce(pick: (tx: SentTransaction) => boolean, mode: LieMode, hideMs?: number): Promise<SentTransaction>;
  /** Every broadcast that reached the proxy, in order (refused ones included). */
  readonly sent: readonly SentTransaction[];
  close(): Promise<void>;
};

type RpcRequest = { jsonrpc: "2.0"; id: unknown; method: string; params?: unknown[] };

export async function startRpcRefusalProxy(targetUrl: string): Promise<RpcRefusalProxy> {
  /** message undefined: dropped (answered as taken, never forwarded); lie: forwarded, then an error. */
  const refusals: Array<{
    pick: (tx: SentTransaction) => boolean;
    message: string | undefined;
    lie?: { mode: LieMode; hideMs: number };
    done: (tx: SentTransaction) => void;
  }> = [];
  const standing: Array<{ pick: (tx: SentTransaction) => boolean; message: string; count: number }> = [];
  /** Hashes whose receipt and body a lagging node does not have yet, until the given time. */
  const hidden = new Map<string, number>();
  let nextSendStep: { step: () => Promise<void>; done: () => void } | undefined;
  const sent: SentTransaction[] = [];
  let sendDelayMs: number | undefined;
  /** The delayed broadcasts, forwarded one after another. */
  let delayed = Promise.resolve();

  const forward = async (body: unknown): Promise<unknown> => {
    const answer = await fetch(targetUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return answer.json();
  };

  /** The refusal for one request, or undefined to pass it on. */
  const refusalFor = async (request: RpcRequest): Promise<unknown> => {
    if (request.method === "eth_getTransactionReceipt" || request.method === "eth_getTransactionByHash") {
      const hash = String(request.params?.[0]).toLowerCase();
      const until = hidden.get(hash);
      if (until !== undefined && Date.now() < until) return { jsonrpc: "2.0", id: request.id, result: null };
      return undefined;
    }
    if (request.method !== "eth_sendRawTransaction") return undefined;
    const raw = request.params?.[0] as Hex;
    const tx: SentTransaction = {
      from: (
        await recoverTransactionAddress({ serializedTransaction: raw as never })
      ).toLowerCase() as Address,
      to: parseTransaction(raw).to?.toLowerCase() as Address | undefined,
      nonce: parseTransaction(raw).nonce ?? 0,
      data: parseTransaction(raw).data ?? "0x",
      hash: keccak256(raw),
    };
    sent.push(tx);
    const refusing = standing.find((refusal) => refusal.pick(tx));
    if (refusing) {
      refusing.count++;
      return { jsonrpc: "2.0", id: request.id, error: { code: -32000, message: refusing.message } };
    }
    const index = refusals.findIndex((refusal) => refusal.pick(tx));
    if (index < 0) return undefined;
    const [refusal] = refusals.splice(index, 1);
    if (refusal!.lie) {
      const { mode, hideMs } = refusal!.lie;
      await forward({ jsonrpc: "2.0", id: 0, method: "eth_sendRawTransaction", params: [raw] });
      refusal!.done(tx);
      if (mode === "timeout") return { jsonrpc: "2.0", id: request.id, error: REQUEST_TIMED_OUT };
      hidden.set(tx.hash.toLowerCase(), Date.now() + hideMs);
      const message = `nonce too low: next nonce ${tx.nonce + 1}, tx nonce ${tx.nonce}`;
      return { jsonrpc: "2.0", id: request.id, error: { code: -32000, message } };
    }
    refusal!.done(tx);
    if (refusal!.message === undefined) return { jsonrpc: "2.0", id: request.id, result: tx.hash };
    return { jsonrpc: "2.0", id: request.id, error: { code: -32000, message: refusal!.message } };
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString()) as RpcRequest | RpcRequest[];
    const requests = Array.isArray(body) ? body : [body];
    const answers: unknown[] = [];
    for (const item of requests) answers.push(await refusalFor(item));
    if (sendDelayMs !== undefined) {
      const wait = sendDelayMs;
      for (const [n, item] of requests.entries()) {
        if (answers[n] !== undefined || item.method !== "eth_sendRawTransaction") continue;
        const raw = item.params?.[0] as Hex;
        answers[n] = { jsonrpc: "2.0", id: item.id, result: keccak256(raw) };
        const taken = sleep(wait);
        delayed = delayed.then(async () => {
          await taken;
          await forward({ jsonrpc: "2.0", id: 0, method: "eth_sendRawTransaction", params: [raw] }).catch(
            () => undefined,
          );
        });
      }
    }
    const rest = requests.filter((_, n) => answers[n] === undefined);
    if (nextSendStep && rest.some((item) => item.method === "eth_sendRawTransaction")) {
      const { step, done } = nextSendStep;
      nextSendStep = undefined;
      await step();
      done();
    }
    if (rest.length > 0) {
      const forwarded = await forward(Array.isArray(body) ? rest : rest[0]);
      const list = Array.isArray(forwarded) ? forwarded : [forwarded];
      const byId = new Map((list as Array<{ id: unknown }>).map((answer) => [answer.id, answer]));
      requests.forEach((item, n) => {
        if (answers[n] === undefined) answers[n] = byId.get(item.id);
      });
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify(Array.isArray(body) ? answers : answers[0]));
  };

  const beforeNextSend = (step: () => Promise<void>): Promise<void> =>
    new Promise<void>((resolve) => {
      nextSendStep = { step, done: resolve };
    });

  const server = await startLoopbackServer(handle);

  return {
    url: server.url,
    get sent() {
      return sent;
    },
    refuseOnce: (pick, message = INSUFFICIENT_FUNDS_MESSAGE) =>
      new Promise<SentTransaction>((resolve) => {
        refusals.push({ pick, message, done: resolve });
      }),
    refuseEvery: (pick, message = INSUFFICIENT_FUNDS_MESSAGE) => {
      let resolveFirst: (tx: SentTransaction) => void = () => {};
      const first = new Promise<SentTransaction>((resolve) => {
        resolveFirst = resolve;
      });
      const entry = {
        pick: (tx: SentTransaction) => {
          if (!pick(tx)) return false;
          resolveFirst(tx);
          return true;
        },
        message,
        count: 0,
      };
      standing.push(entry);
      return {
        first,
        refused: () => entry.count,
        stop: () => {
          const at = standing.indexOf(entry);
          if (at >= 0) standing.splice(at, 1);
        },
      };
    },
    dropOnce: (pick) =>
      new Promise<SentTransaction>((resolve) => {
        refusals.push({ pick, message: undefined, done: resolve });
      }),
    lieOnce: (pick, mode, hideMs = 3_000) =>
      new Promise<SentTransaction>((resolve) => {
        refusals.push({ pick, message: undefined, lie: { mode, hideMs }, done: resolve });
      }),
    delaySends: (ms) => {
      sendDelayMs = ms;
    },
    beforeNextSend,
    raiseBaseFeeBeforeSend: (wei) =>
      beforeNextSend(async () => {
        await forward({
          jsonrpc: "2.0",
          id: 0,
          method: "dev_setNextBlockBaseFeePerGas",
          params: [`0x${wei.toString(16)}`],
        });
      }),
    close: () => server.close(),
  };
}
