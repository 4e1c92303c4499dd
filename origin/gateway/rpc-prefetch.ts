import type { ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { RPC_MAX_BATCH_BYTES } from "../../shared/constants.ts";
import { RecencyMap } from "../../shared/recency-map.ts";
import { RECENT_AUTHENTICATIONS, type RecentAuthentications } from "../auth/recent-authentications.ts";
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
 * A token answered 429 (its agent's request window spent, or its /rpc places taken) is sent
 * nothing ahead until its Retry-After has passed: otherwise every call it sends past its agent's
 * limit, each refused, would still reach the chain, and the limit would bound nothing upstream.
 */
export function rpcPrefetch(
  upstream: JsonRpcUpstream | undefined,
  recentAuthentications: RecentAuthentications,
  slots: InFlightLimiter,
  now: () => number = Date.now,
): MiddlewareHandler<AppEnv> {
  // Token id → the instant (ms) its last 429 said to come back. Only ids that worked from their
  // client enter, so at most as many as RecentAuthentications holds; the oldest go first.
  const refusedUntil = new RecencyMap<string, number>();
  const refused = (tokenId: string): boolean => (refusedUntil.get(tokenId) ?? 0) > now();
  return async (c, next) => {
    const token = parseBearerHeader(c.req.header("authorization"));
    const known = token !== null && recentAuthentications.has(addressGroup(c.get("clientIp")), token.tokenId);
    if (upstream && known && !refused(token.tokenId)) {
      started.set(c.req.raw, prefetch(c, upstream, token.tokenId, slots));
    }
    await next();
    if (known && c.res.status === 429) {
      const seconds = Number(c.res.headers.get("retry-after"));
      refusedUntil.set(token.tokenId, now() + (Number.isFinite(seconds) && seconds > 0 ? seconds : 1) * 1000);
      if (refusedUntil.size > RECENT_AUTHENTICATIONS.maxEntries) refusedUntil.shift();
    }
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
  // this node's memory until then, whether it is sent or dropped. And until the chain has
  // answered: a client that hangs up first leaves the call out at the chain.
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  const sent = send(call, upstream);
  const release = (): void => void sent.finally(() => slots.release(tokenId));
  if (!outgoing || outgoing.closed) release();
  else outgoing.once("close", release);
  return { read, call, sent };
}
