import type { ServerResponse } from "node:http";
import type { Handler } from "hono";
import { RPC_MAX_BATCH_BYTES } from "../../shared/constants.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { InFlightLimiter } from "../http/in-flight.ts";
import { bodyIncompleteError, readBodyLimited } from "../http/read-body.ts";
import { ignoreRefusal, type RefusalCounter } from "../http/refusals.ts";
import { RPC_ANSWER_DEADLINE_MS } from "./limits.ts";
import { finishCall, planCall, refusal, send } from "./rpc-call.ts";
import { takePrefetched } from "./rpc-prefetch.ts";

/**
 * POST /agent/v1/rpc: a read-only JSON-RPC proxy. The closed allowlist is the only way through;
 * there is no submission or state-changing path, whatever the agent's capabilities
 * (docs/security.md#a-cheap-token-public-registration-or-read-only). Limits are enforced before any
 * answer leaves, and before any upstream call except a prefetched one (rpc-prefetch.ts: a token
 * that authenticated from this client lately, under a cap of its own). JSON-RPC errors answer with
 * HTTP 200.
 *
 * What a node holds is bounded: the body (64 KB, cut off while it streams, read within
 * BODY_DEADLINE_MS), calls in flight per agent and per node (429 past them), each upstream answer
 * (RPC_MAX_RESPONSE_BYTES, dropped while it streams) and how long an answer may take to leave
 * (`answerDeadlineMs`, RPC_ANSWER_DEADLINE_MS unless the operator sets another: the connection of
 * a client that reads none of it is closed). The slot is taken only once the body is in: a client
 * that sends its body slowly, or never, holds none, so a few tokens cannot keep every other
 * agent's calls out by trickling bodies, nor by reading none of their answers for longer than the
 * deadline.
 *
 * A call of notifications only is answered 204 with no body; it still counts as a request against
 * the agent's window and holds a slot for the moment it is read, like any call.
 */
export function rpcHandler(
  upstream: JsonRpcUpstream | undefined,
  inFlight: InFlightLimiter,
  refusals: RefusalCounter = ignoreRefusal,
  answerDeadlineMs: number = RPC_ANSWER_DEADLINE_MS,
): Handler<AppEnv> {
  return async (c) => {
    const prefetched = await takePrefetched(c);
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
    const call = prefetched?.call ?? planCall(read.value);
    const sent = call.forward.length === 0 ? undefined : (prefetched?.sent ?? send(call, upstream));
    // Nor before the chain has answered: a client that hangs up leaves its call out at the chain,
    // and a slot given back then let it send another at once, as many as it liked.
    const releaseOnceAnswered = (): void => void Promise.resolve(sent).finally(release);
    const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    if (outgoing?.closed) releaseOnceAnswered();
    else outgoing?.once("close", releaseOnceAnswered);
    try {
      const reply = await sent;
      const answer = finishCall(call, reply);
      // Only notifications: JSON-RPC 2.0 answers nothing, so HTTP's "no content" (docs/api.md#json-rpc-on-agentv1rpc).
      return answer === null ? c.body(null, 204) : c.json(answer);
    } finally {
      if (!outgoing) release();
      else if (!released) closeUnread(outgoing, answerDeadlineMs);
    }
  };
}

/**
 * Closes the connection of an answer that has not left within `deadlineMs` of being made: its
 * client reads none of it (or too slowly to be told from one that does not), and the call's place
 * and what is left of its answer are the node's again (its `close` releases them).
 */
function closeUnread(outgoing: ServerResponse, deadlineMs: number): void {
  const timer = setTimeout(() => outgoing.destroy(), deadlineMs);
  timer.unref();
  outgoing.once("close", () => clearTimeout(timer));
}
