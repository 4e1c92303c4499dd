import type { ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { RPC_MAX_BATCH_BYTES } from "../../shared/constants.ts";
import type { RecentAuthentications } from "../auth/recent-authentications.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { addressGroup } from "../http/client-ip.ts";
import type { AppEnv } from "../http/env.ts";
import type { InFlightLimiter } from "../http/in-flight.ts";
import { type ReadBodyResult, readBodyLimited } from "../http/read-body.ts";
import { type PlannedCall, planCall, send, type UpstreamReply } from "./rpc-call.ts";

/** What the prefetch read, planned and (when a slot was free) sent, for rpcHandler to finish. */
export type RpcPrefetched = {
  read: ReadBodyResult;
  call?: PlannedCall;
  sent?: Promise<UpstreamReply>;
};

/** Each request's prefetch, until rpcHandler takes it (or the request is gone). */
const started = new WeakMap<Request, Promise<RpcPrefetched>>();

/** The request's prefetch, if one was started: what rpcHandler finishes instead of reading anew. */
export function takePrefetched(c: Context<AppEnv>): Promise<RpcPrefetched> | undefined {
  const prefetched = started.get(c.req.raw);
  started.delete(c.req.raw);
  return prefetched;
}

/**
 * Runs before bearerAuth on POST /rpc. A proxied read costs the token's database read plus the
 * upstream round trip; for a token that authenticated from this client lately (the pre-auth
 * tier's RecentAuthentications), the body is read, checked and forwarded while that read is out,
 * so the two overlap. Nothing it fetches is answered before authentication, the capability check
 * and the /rpc slot have admitted the request, exactly as without it; a request that fails them
 * gets the same refusal, and the upstream's answer is dropped. Only reads on the allowlist are
 * ever forwarded, with or without a prefetch, so an upstream call sent for a request that is then
 * refused changes nothing anywhere. Any other request (no token, or one not seen from this client)
 * is not touched here: its body is read only once it has authenticated. Calls sent ahead take
 * `slots` (RPC_PREFETCH_IN_FLIGHT, per token); with none free, the call waits for authentication.
 */
export function rpcPrefetch(
  upstream: JsonRpcUpstream | undefined,
  recentAuthentications: RecentAuthentications,
  slots: InFlightLimiter,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const token = parseBearerHeader(c.req.header("authorization"));
    if (upstream && token && recentAuthentications.has(addressGroup(c.get("clientIp")), token.tokenId)) {
      started.set(c.req.raw, prefetch(c, upstream, token.tokenId, slots));
    }
    await next();
  };
}

async function prefetch(
  c: Context<AppEnv>,
  upstream: JsonRpcUpstream,
  tokenId: string,
  slots: InFlightLimiter,
): Promise<RpcPrefetched> {
  const read = await readBodyLimited(c, RPC_MAX_BATCH_BYTES);
  if (!read.ok) return { read };
  const call = planCall(read.value);
  if (call.forward.length === 0 || !slots.tryAcquire(tokenId)) return { read, call };
  // Held until the response has gone (or the client left), as an /rpc slot is: the answer sits in
  // this node's memory until then, whether it is sent or dropped.
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  const sent = send(call, upstream);
  if (!outgoing || outgoing.closed) void sent.finally(() => slots.release(tokenId));
  else outgoing.once("close", () => slots.release(tokenId));
  return { read, call, sent };
}
