import type { ServerResponse } from "node:http";
import type { Handler } from "hono";
import {
  RPC_MAX_BATCH,
  RPC_MAX_BATCH_BYTES,
  RPC_MAX_RESPONSE_BYTES,
  RPC_READ_ALLOWLIST,
} from "../../shared/constants.ts";
import type { JsonRpcUpstream, UpstreamResult } from "../chain/json-rpc-upstream.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { InFlightLimiter } from "../http/in-flight.ts";
import { bodyIncompleteError, readBodyLimited } from "../http/read-body.ts";
import { ignoreRefusal, type RefusalCounter } from "../http/refusals.ts";

type Id = string | number | null;
type RpcError = { code: number; message: string; data?: unknown };
type RpcResponse = { jsonrpc: "2.0"; id: Id; result?: unknown; error?: RpcError };
type ValidRequest = { id: Id; method: string; params: unknown };

const ALLOWED = new Set<string>(RPC_READ_ALLOWLIST);
const UTF8 = new TextDecoder();
/** Every refusal names the allowlist and the batch limits, so an agent can correct itself. */
const POLICY = {
  allowed_methods: RPC_READ_ALLOWLIST,
  max_batch: RPC_MAX_BATCH,
  max_batch_bytes: RPC_MAX_BATCH_BYTES,
};

const refusal = (id: Id, code: number, message: string): RpcResponse => ({
  jsonrpc: "2.0",
  id,
  error: { code, message, data: POLICY },
});

/**
 * POST /agent/v1/rpc: a read-only JSON-RPC proxy. The closed allowlist is the only way through;
 * there is no submission or state-changing path, whatever the agent's capabilities
 * (docs/security.md#a-cheap-token-public-registration-or-read-only). Limits are enforced before any
 * answer leaves, and before any upstream call except a prefetched one (rpc-prefetch.ts: a token
 * that authenticated from this client lately, under a cap of its own). JSON-RPC errors answer with
 * HTTP 200.
 *
 * What a node holds is bounded: the body (64 KB, cut off while it streams, read within
 * BODY_DEADLINE_MS), calls in flight per agent and per node (429 past them) and each upstream
 * answer (RPC_MAX_RESPONSE_BYTES, dropped while it streams). The slot is taken only once the body
 * is in: a client that sends its body slowly, or never, holds none, so a few tokens cannot keep
 * every other agent's calls out by trickling bodies.
 */
export function rpcHandler(
  upstream: JsonRpcUpstream | undefined,
  inFlight: InFlightLimiter,
  refusals: RefusalCounter = ignoreRefusal,
): Handler<AppEnv> {
  return async (c) => {
    const prefetched = await c.get("rpcPrefetch");
    const read = prefetched?.read ?? (await readBodyLimited(c, RPC_MAX_BATCH_BYTES));
    if (!read.ok && read.error === "incomplete") throw bodyIncompleteError();
    // JSON-RPC's form, HTTP's status: a proxy or client that reads only the status sees 413 too.
    if (!read.ok) return c.json(refusal(null, -32600, `request exceeds ${RPC_MAX_BATCH_BYTES} bytes`), 413);

    const agentId = c.get("agent").agentId;
    if (!inFlight.tryAcquire(agentId)) {
      refusals("rpc_in_flight");
      throw new AppError("rate_limited", "too many /rpc calls in flight; retry when one has finished", {
        headers: { "Retry-After": "1" },
        fields: { retry_after: 1 },
      });
    }
    // The slot is held until the answer has left (or the connection closed), not just until it is
    // built: a client that reads slowly must not get its next call in while the last one's answer
    // still sits in this node's memory.
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      inFlight.release(agentId);
    };
    const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    // A client that left just after its body was in has already closed: its slot goes back now.
    if (outgoing?.closed) release();
    else outgoing?.once("close", release);
    try {
      const call = prefetched?.call ?? planCall(read.value);
      const reply = call.forward.length === 0 ? undefined : await (prefetched?.sent ?? send(call, upstream));
      return c.json(finishCall(call, reply));
    } finally {
      if (!outgoing) release();
    }
  };
}

/**
 * A call read and checked: the refusals already answered, the allowed requests to forward, and
 * the payload that forwards them. Planning has no effect, so it may run before authentication.
 */
export type PlannedCall = {
  /** The body was one request, not a batch: answered as one object. */
  single: boolean;
  responses: RpcResponse[];
  forward: { index: number; request: ValidRequest }[];
};

/** What forwarding a call gave: the upstream's answer, or that no chain is configured. */
export type UpstreamReply = UpstreamResult | "no_upstream";

export function planCall(bytes: Uint8Array): PlannedCall {
  let body: unknown;
  try {
    body = JSON.parse(UTF8.decode(bytes));
  } catch {
    return answered(refusal(null, -32700, "parse error"));
  }
  if (!Array.isArray(body)) return plan([body], true);
  if (body.length === 0) return answered(refusal(null, -32600, "empty batch"));
  if (body.length > RPC_MAX_BATCH) {
    return answered(refusal(null, -32600, `batch exceeds ${RPC_MAX_BATCH} requests`));
  }
  return plan(body, false);
}

const answered = (response: RpcResponse): PlannedCall => ({
  single: true,
  responses: [response],
  forward: [],
});

function plan(items: unknown[], single: boolean): PlannedCall {
  const responses: RpcResponse[] = new Array(items.length);
  const forward: { index: number; request: ValidRequest }[] = [];
  items.forEach((item, index) => {
    const parsed = parseRequest(item);
    if ("error" in parsed) responses[index] = parsed.error;
    else if (!ALLOWED.has(parsed.method)) {
      responses[index] = refusal(parsed.id, -32601, `method '${parsed.method}' is not allowed`);
    } else forward.push({ index, request: parsed });
  });
  return { single, responses, forward };
}

/** Sends a planned call's allowed requests upstream in one payload. Never throws. */
export async function send(call: PlannedCall, upstream: JsonRpcUpstream | undefined): Promise<UpstreamReply> {
  if (!upstream) return "no_upstream";
  // Upstream ids are our indexes, so agents' ids (even duplicates) map back exactly.
  const outgoing = call.forward.map(({ index, request }) => ({
    jsonrpc: "2.0",
    id: index,
    method: request.method,
    params: request.params ?? [],
  }));
  return upstream.send(outgoing.length === 1 ? outgoing[0] : outgoing);
}

/** Answers every element in order; refused elements never stop the others. */
function finishCall(call: PlannedCall, reply: UpstreamReply | undefined): RpcResponse | RpcResponse[] {
  const responses = [...call.responses];
  const failAll = (message: string): void => {
    for (const { index, request } of call.forward) {
      responses[index] = { jsonrpc: "2.0", id: request.id, error: { code: -32000, message } };
    }
  };
  if (reply === undefined) {
    // Nothing was forwarded.
  } else if (reply === "no_upstream") failAll("upstream unavailable: no chain is configured");
  else if (!reply.ok) {
    failAll(
      reply.error === "too_large"
        ? `the answer exceeds ${RPC_MAX_RESPONSE_BYTES} bytes: ask for fewer items per call`
        : `upstream unavailable: ${reply.error}`,
    );
  } else {
    const byIndex = new Map<number, { result?: unknown; error?: unknown }>();
    for (const item of Array.isArray(reply.value) ? reply.value : [reply.value]) {
      if (item && typeof item === "object" && typeof (item as { id?: unknown }).id === "number") {
        byIndex.set((item as { id: number }).id, item as { result?: unknown; error?: unknown });
      }
    }
    for (const { index, request } of call.forward) {
      const answer = byIndex.get(index);
      if (!answer) {
        responses[index] = {
          jsonrpc: "2.0",
          id: request.id,
          error: { code: -32000, message: "upstream gave no answer" },
        };
      } else if (answer.error !== undefined) {
        responses[index] = { jsonrpc: "2.0", id: request.id, error: upstreamError(answer.error) };
      } else {
        responses[index] = { jsonrpc: "2.0", id: request.id, result: answer.result ?? null };
      }
    }
  }
  return call.single ? responses[0]! : responses;
}

function parseRequest(item: unknown): ValidRequest | { error: RpcResponse } {
  if (!item || typeof item !== "object" || Array.isArray(item)) {
    return { error: refusal(null, -32600, "invalid request") };
  }
  const { jsonrpc, id, method, params } = item as Record<string, unknown>;
  const validId: Id =
    typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) || id === null ? id : null;
  if (jsonrpc !== "2.0" || typeof method !== "string") {
    return { error: refusal(validId, -32600, "invalid request") };
  }
  if (params !== undefined && (typeof params !== "object" || params === null)) {
    return { error: refusal(validId, -32602, "params must be an array or an object") };
  }
  return { id: validId, method, params };
}

/** Passes the node's error code and message through, never anything that is not JSON-RPC shaped. */
function upstreamError(error: unknown): RpcError {
  const { code, message, data } = (error ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
  return {
    code: typeof code === "number" ? code : -32000,
    message: typeof message === "string" ? message : "upstream error",
    ...(data === undefined ? {} : { data }),
  };
}
