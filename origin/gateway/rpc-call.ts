/**
 * One /rpc call as JSON-RPC: its body read against the allowlist and the batch limits, its allowed
 * requests forwarded in one upstream payload, and the answer put together in the agent's ids.
 */
import {
  RPC_MAX_BATCH,
  RPC_MAX_BATCH_BYTES,
  RPC_MAX_RESPONSE_BYTES,
  RPC_READ_ALLOWLIST,
} from "../../shared/constants.ts";
import { MAX_JSON_DEPTH, nestsAtMost } from "../../shared/json-depth.ts";
import type { JsonRpcUpstream, UpstreamResult } from "../chain/json-rpc-upstream.ts";

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

export const refusal = (id: Id, code: number, message: string): RpcResponse => ({
  jsonrpc: "2.0",
  id,
  error: { code, message, data: POLICY },
});

/**
 * A call read and checked: the refusals already answered, the allowed requests to forward, and
 * the payload that forwards them. Planning has no effect, so it may run before authentication.
 */
export type PlannedCall = {
  /** The body was one request, not a batch: answered as one object. */
  single: boolean;
  /** By element; a notification's place stays empty: it is neither answered nor forwarded. */
  responses: RpcResponse[];
  /** How many elements were notifications (a request without an `id` member). */
  notifications: number;
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
  notifications: 0,
  forward: [],
});

function plan(items: unknown[], single: boolean): PlannedCall {
  const responses: RpcResponse[] = new Array(items.length);
  const forward: { index: number; request: ValidRequest }[] = [];
  let notifications = 0;
  items.forEach((item, index) => {
    const parsed = parseRequest(item);
    if (parsed === "notification") notifications += 1;
    else if ("error" in parsed) responses[index] = parsed.error;
    else if (!ALLOWED.has(parsed.method)) {
      responses[index] = refusal(parsed.id, -32601, `method '${parsed.method}' is not allowed`);
    } else forward.push({ index, request: parsed });
  });
  return { single, responses, notifications, forward };
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

/**
 * Answers every element in order; refused elements never stop the others. Notifications get no
 * answer: null when nothing is left to answer (one notification, or a batch of them), which the
 * route sends as 204 with no body (docs/api.md#json-rpc-on-agentv1rpc).
 */
export function finishCall(
  call: PlannedCall,
  reply: UpstreamReply | undefined,
): RpcResponse | RpcResponse[] | null {
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
    // A node that will not take the call as a whole (a batch over its limit) answers one error
    // with id null instead of the batch: that error is every element's, in the node's words.
    const whole = Array.isArray(reply.value) ? undefined : wholeCallError(reply.value);
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
          error: whole ? upstreamError(whole) : { code: -32000, message: "upstream gave no answer" },
        };
      } else if (answer.error !== undefined) {
        responses[index] = { jsonrpc: "2.0", id: request.id, error: upstreamError(answer.error) };
      } else if (!nestsAtMost(answer.result, MAX_JSON_DEPTH)) {
        responses[index] = { jsonrpc: "2.0", id: request.id, error: TOO_DEEP };
      } else {
        responses[index] = { jsonrpc: "2.0", id: request.id, result: answer.result ?? null };
      }
    }
  }
  if (call.single) return responses[0] ?? null;
  if (call.notifications === 0) return responses;
  const answers = responses.filter((response) => response !== undefined);
  return answers.length === 0 ? null : answers;
}

/**
 * One element read as JSON-RPC 2.0. An id is a string, null, or a number that JSON.parse holds
 * exactly (a safe integer); any other id is an invalid request answered with id null, never an id
 * the client did not send (docs/api.md#json-rpc-on-agentv1rpc). A well-formed request without an
 * `id` member is a notification.
 */
function parseRequest(item: unknown): ValidRequest | { error: RpcResponse } | "notification" {
  if (!item || typeof item !== "object" || Array.isArray(item)) {
    return { error: refusal(null, -32600, "invalid request") };
  }
  const { jsonrpc, id, method, params } = item as Record<string, unknown>;
  const validId = typeof id === "string" || id === null || Number.isSafeInteger(id);
  if (jsonrpc !== "2.0" || typeof method !== "string") {
    return { error: refusal(validId ? (id as Id) : null, -32600, "invalid request") };
  }
  // Every allowed method only reads, so a notification's answer would be dropped unread: it is not
  // forwarded, and no error is answered for it either (JSON-RPC 2.0 answers no notification).
  if (id === undefined) return "notification";
  if (!validId) {
    return {
      error: refusal(
        null,
        -32600,
        "invalid request: an id is a string, null, or an integer of at most 9007199254740991 in magnitude",
      ),
    };
  }
  if (params !== undefined && (typeof params !== "object" || params === null)) {
    return { error: refusal(id as Id, -32602, "params must be an array or an object") };
  }
  // Forwarded, deeper params would overflow the upstream call's JSON.stringify, failing the whole
  // batch as an unreachable chain; no allowed method takes params more than a few levels deep.
  if (params !== undefined && !nestsAtMost(params, MAX_JSON_DEPTH)) {
    return { error: refusal(id as Id, -32602, `params nest deeper than ${MAX_JSON_DEPTH} levels`) };
  }
  return { id: id as Id, method, params };
}

/** The error of an answer that names no request (id null or none): the node's word on the whole call. */
function wholeCallError(answer: unknown): unknown {
  if (!answer || typeof answer !== "object") return undefined;
  const { id, error } = answer as { id?: unknown; error?: unknown };
  return (id === null || id === undefined) && error !== undefined && error !== null ? error : undefined;
}

/**
 * What a node answers in place of a value nested past MAX_JSON_DEPTH (no read of the allowlist
 * nests more than a few levels): passed on, it overflowed the answer's JSON.stringify, a 500 that
 * took the rest of the batch with it.
 */
const TOO_DEEP: RpcError = {
  code: -32000,
  message: `the chain's answer nests deeper than ${MAX_JSON_DEPTH} levels`,
};

/** Passes the node's error code and message through, never anything that is not JSON-RPC shaped. */
function upstreamError(error: unknown): RpcError {
  if (!nestsAtMost(error, MAX_JSON_DEPTH)) return TOO_DEEP;
  const { code, message, data } = (error ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
  return {
    code: typeof code === "number" ? code : -32000,
    message: typeof message === "string" ? message : "upstream error",
    ...(data === undefined ? {} : { data }),
  };
}
