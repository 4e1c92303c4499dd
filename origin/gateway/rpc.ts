import type { ServerResponse } from "node:http";
import type { Handler } from "hono";
import {
  RPC_MAX_BATCH,
  RPC_MAX_BATCH_BYTES,
  RPC_MAX_RESPONSE_BYTES,
  RPC_READ_ALLOWLIST,
} from "../../shared/constants.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
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
 * upstream call. JSON-RPC errors answer with HTTP 200.
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
    const read = await readBodyLimited(c, RPC_MAX_BATCH_BYTES);
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
      return await handle(c, read.value, upstream);
    } finally {
      if (!outgoing) release();
    }
  };
}

async function handle(
  c: Parameters<Handler<AppEnv>>[0],
  bytes: Uint8Array,
  upstream: JsonRpcUpstream | undefined,
): Promise<Response> {
  let body: unknown;
  try {
    body = JSON.parse(UTF8.decode(bytes));
  } catch {
    return c.json(refusal(null, -32700, "parse error"));
  }

  if (!Array.isArray(body)) {
    const [response] = await answer([body], upstream);
    return c.json(response);
  }
  if (body.length === 0) return c.json(refusal(null, -32600, "empty batch"));
  if (body.length > RPC_MAX_BATCH) {
    return c.json(refusal(null, -32600, `batch exceeds ${RPC_MAX_BATCH} requests`));
  }
  return c.json(await answer(body, upstream));
}

/** Answers every element in order; refused elements never stop the others. */
async function answer(items: unknown[], upstream: JsonRpcUpstream | undefined): Promise<RpcResponse[]> {
  const responses: RpcResponse[] = new Array(items.length);
  const forward: { index: number; request: ValidRequest }[] = [];
  items.forEach((item, index) => {
    const parsed = parseRequest(item);
    if ("error" in parsed) responses[index] = parsed.error;
    else if (!ALLOWED.has(parsed.method)) {
      responses[index] = refusal(parsed.id, -32601, `method '${parsed.method}' is not allowed`);
    } else forward.push({ index, request: parsed });
  });
  if (forward.length === 0) return responses;

  const failAll = (message: string): void => {
    for (const { index, request } of forward) {
      responses[index] = { jsonrpc: "2.0", id: request.id, error: { code: -32000, message } };
    }
  };
  if (!upstream) {
    failAll("upstream unavailable: no chain is configured");
    return responses;
  }
  // Upstream ids are our indexes, so agents' ids (even duplicates) map back exactly.
  const outgoing = forward.map(({ index, request }) => ({
    jsonrpc: "2.0",
    id: index,
    method: request.method,
    params: request.params ?? [],
  }));
  const result = await upstream.send(outgoing.length === 1 ? outgoing[0] : outgoing);
  if (!result.ok) {
    failAll(
      result.error === "too_large"
        ? `the answer exceeds ${RPC_MAX_RESPONSE_BYTES} bytes: ask for fewer items per call`
        : `upstream unavailable: ${result.error}`,
    );
    return responses;
  }
  const byIndex = new Map<number, { result?: unknown; error?: unknown }>();
  for (const item of Array.isArray(result.value) ? result.value : [result.value]) {
    if (item && typeof item === "object" && typeof (item as { id?: unknown }).id === "number") {
      byIndex.set((item as { id: number }).id, item as { result?: unknown; error?: unknown });
    }
  }
  for (const { index, request } of forward) {
    const reply = byIndex.get(index);
    if (!reply) {
      responses[index] = {
        jsonrpc: "2.0",
        id: request.id,
        error: { code: -32000, message: "upstream gave no answer" },
      };
    } else if (reply.error !== undefined) {
      responses[index] = { jsonrpc: "2.0", id: request.id, error: upstreamError(reply.error) };
    } else {
      responses[index] = { jsonrpc: "2.0", id: request.id, result: reply.result ?? null };
    }
  }
  return responses;
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
