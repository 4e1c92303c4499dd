import type { Hono } from "hono";
import type { Result } from "../shared/result.ts";
import type { AppEnv } from "./http/env.ts";
import type { Worker } from "./workers/loop.ts";

/** The capabilities the origin is assembled from (compose.ts), in the order their routes mount. */
export type CapabilityName =
  | "health"
  | "console"
  | "money"
  | "registration"
  | "openapi"
  | "gateway"
  | "x402"
  | "keypool"
  | "identity"
  | "events"
  | "webhooks";

/**
 * One capability of the origin, in the one shape composeOrigin knows: the routers it mounts under
 * BASE_PATH, the background workers it runs, and what it drains at shutdown. What must hold before
 * any capability is built is a start-up check (startup/), run first by composeOrigin.
 */
export type Capability = {
  name: CapabilityName;
  /** Mounted under {base} in this order; Hono runs matching handlers in registration order. */
  routes: readonly { path: string; router: Hono<AppEnv> }[];
  /** Starts this capability's background workers; called once, after the server listens. */
  workers: () => Worker[];
  /** Finishes what this capability has in flight, before the workers stop and the clients close. */
  stop: () => Promise<void>;
  /**
   * Ends the responses that never end by themselves (event streams), before the server drains:
   * the drain would otherwise wait its whole grace for them.
   */
  endStreams: () => void;
};

/** A start-up check's answer: what it built, or each reason the origin must not start. */
export type StartupCheck<T> = Result<T, string[]>;

/** The start-up checks composeOrigin runs, in order (startup/). */
export type StartupCheckName = "keys" | "money" | "webhooks" | "admin_key";

export function capability(name: CapabilityName, parts: Partial<Omit<Capability, "name">> = {}): Capability {
  return {
    name,
    routes: parts.routes ?? [],
    workers: parts.workers ?? (() => []),
    stop: parts.stop ?? (async () => {}),
    endStreams: parts.endStreams ?? (() => {}),
  };
}
