/**
 * Typed JSON-RPC calls over json-rpc-upstream.ts: a call names its method and params and carries
 * the parser of its result (eth-calls.ts builds the ones the origin makes); a batch sends its calls
 * in one request, in the order listed, and answers each call's parsed result or why there is none.
 * The answer is read here, once, so no caller picks a node's JSON apart. (The /rpc proxy forwards
 * agents' own calls and reads nothing: it uses the upstream directly.)
 */
import { err, ok, type Result } from "../../shared/result.ts";
import type { JsonRpcUpstream, UpstreamFailure } from "./json-rpc-upstream.ts";

/** One call: what goes on the wire, and how its result is read (undefined: not what it answers). */
export type RpcCall<T> = {
  readonly method: string;
  readonly params: readonly unknown[];
  readonly parse: (result: unknown) => T | undefined;
};

/** A JSON-RPC error object as a node sent it; `code` is undefined when the node gave none. */
export type RpcErrorObject = { code: number | undefined; message: string };

/**
 * Why a call has no result: the round trip failed (or its answer was no batch: `bad_body`), the
 * node left the call out of its batch answer, answered an error object, or answered something
 * that is neither a result the call's parser takes nor an error object.
 */
export type RpcCallFailure =
  | { code: "upstream"; failure: UpstreamFailure }
  | { code: "missing" }
  | { code: "rpc_error"; error: RpcErrorObject }
  | { code: "unparseable" };

export type RpcCallResult<T> = Result<T, RpcCallFailure>;

/** A batch's calls in the order they are sent: calls, or lists of calls (sent where they stand). */
export type RpcBatchCalls = readonly (RpcCall<unknown> | RpcBatchCalls)[];

/** The results of a batch, in the shape of its calls. */
export type RpcBatchResults<C> = {
  readonly [K in keyof C]: C[K] extends RpcCall<infer T>
    ? RpcCallResult<T>
    : C[K] extends RpcBatchCalls
      ? RpcBatchResults<C[K]>
      : never;
};

type Sender = Pick<JsonRpcUpstream, "send" | "maxBatchCalls">;

// Failures carry nothing of the call, so one value serves them all.
const MISSING: RpcCallResult<never> = err({ code: "missing" });
const UNPARSEABLE: RpcCallResult<never> = err({ code: "unparseable" });

/** One call on its own (not a batch of one), with the id 1. */
export async function sendRpcCall<T>(rpc: Sender, call: RpcCall<T>): Promise<RpcCallResult<T>> {
  const answer = await rpc.send(wireCall(call, 1));
  return answer.ok
    ? readRpcAnswer(call.parse, answer.value)
    : err({ code: "upstream", failure: answer.error });
}

/**
 * One JSON-RPC batch of `calls` in the order listed, lists flattened where they stand, each with
 * its position as id. Nodes run a batch's calls in that order (geth one by one, the devnet
 * starting each in turn), and callers rely on it: a sender's nonce read before its balance
 * (SenderView, outbox/intent.ts), the block number before the balances it bounds
 * (x402/payee/reservations.ts). The answer's items are matched by id, whatever their order. No calls: no
 * request. Past the upstream's maxBatchCalls, the batch goes in parts, each once the one before
 * has been answered (so the order holds across parts); a part answered with no batch fails its own
 * calls only, and a failed round trip fails its part's and every later part's, which are not sent.
 */
export async function sendRpcBatch<const C extends RpcBatchCalls>(
  rpc: Sender,
  calls: C,
): Promise<RpcBatchResults<C>> {
  // The walk below builds the results in the calls' own shape; the type cannot follow it.
  const results: unknown = await sendCalls(rpc, calls);
  return results as RpcBatchResults<C>;
}

async function sendCalls(rpc: Sender, calls: RpcBatchCalls): Promise<unknown[]> {
  const wire: object[] = [];
  flatten(calls, wire);
  const items: unknown[] = new Array(wire.length);
  const part = Math.max(1, rpc.maxBatchCalls ?? wire.length);
  for (let start = 0; start < wire.length; start += part) {
    const end = Math.min(start + part, wire.length);
    const answer = await rpc.send(start === 0 && end === wire.length ? wire : wire.slice(start, end));
    // A round trip that failed (a timeout, a node gone) would fail the next parts the same way,
    // one timeout each: they are not sent. An answer that is no batch is that part's own.
    if (!answer.ok) {
      items.fill(new Failed(answer.error), start);
      break;
    }
    if (!Array.isArray(answer.value)) {
      items.fill(new Failed("bad_body"), start, end);
      continue;
    }
    const seen = new Set<number>();
    for (const item of answer.value) {
      const id: unknown = typeof item === "object" && item !== null && "id" in item ? item.id : undefined;
      if (typeof id !== "number" || !Number.isInteger(id) || id < start || id >= end) continue;
      // A repeated id: a node or balancer garbled the ids, so no item of the part can be trusted to
      // answer the call its id names (one sender's nonce read as another's, one transaction's
      // receipt as another's). Each call of the part is unanswered.
      if (seen.has(id)) {
        items.fill(new Failed("bad_body"), start, end);
        break;
      }
      seen.add(id);
      items[id] = item;
    }
  }
  return readList(calls, { items, next: 0 });
}

/**
 * One answer object read for a call whose result `parse` reads: its result if `parse` takes it,
 * else its error object, else unparseable. An answer carrying both is read by its result, as the
 * origin always has: a broadcast answered with a hash was taken, whatever else the node said.
 */
export function readRpcAnswer<T>(
  parse: (result: unknown) => T | undefined,
  answer: unknown,
): RpcCallResult<T> {
  if (typeof answer !== "object" || answer === null) return UNPARSEABLE;
  if ("result" in answer) {
    const value = parse(answer.result);
    if (value !== undefined) return ok(value);
  }
  if ("error" in answer) {
    const error = errorObject(answer.error);
    if (error) return err({ code: "rpc_error", error });
  }
  return UNPARSEABLE;
}

function errorObject(error: unknown): RpcErrorObject | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  if (!("message" in error) || typeof error.message !== "string") return undefined;
  const code = "code" in error && typeof error.code === "number" ? error.code : undefined;
  return { code, message: error.message };
}

// Key order as the origin has always sent it, so the bytes on the wire are unchanged.
function wireCall(call: RpcCall<unknown>, id: number): object {
  return { jsonrpc: "2.0", id, method: call.method, params: call.params };
}

function flatten(calls: RpcBatchCalls, wire: object[]): void {
  for (const call of calls) {
    if (isCallList(call)) flatten(call, wire);
    else wire.push(wireCall(call, wire.length));
  }
}

function isCallList(entry: RpcCall<unknown> | RpcBatchCalls): entry is RpcBatchCalls {
  return Array.isArray(entry);
}

/** Where a part's round trip failed, each of its calls' place holds this (no answer item is one). */
class Failed {
  readonly result: RpcCallResult<never>;
  constructor(failure: UpstreamFailure) {
    this.result = err({ code: "upstream", failure });
  }
}

/**
 * The answer items by id (or, for the calls of a part whose round trip failed, that failure), and
 * the next id to read.
 */
type BatchRead = { items: unknown[]; next: number };

function readList(calls: RpcBatchCalls, read: BatchRead): unknown[] {
  return calls.map((call) => {
    if (isCallList(call)) return readList(call, read);
    const item = read.items[read.next++];
    if (item instanceof Failed) return item.result;
    return item === undefined ? MISSING : readRpcAnswer(call.parse, item);
  });
}
