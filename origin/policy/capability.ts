/**
 * The policy routes' handlers, over what the composition root hands them (compose.ts): the
 * enclave to seal changes with, the node's side of a transfer's check (actions/transfer-checks.ts:
 * its cost as its limits count it, value plus the maximum fee, and the node's recipient rules),
 * and x402's answer for a 402 quote.
 */
import type { Handler } from "hono";
import type { AppEnv } from "../http/env.ts";
import { checkPolicyHandler, getPolicyHandler, type PolicyRouteDeps, patchPolicyHandler } from "./routes.ts";

export type PolicyHandlers = { get: Handler<AppEnv>; patch: Handler<AppEnv>; check: Handler<AppEnv> };

export function createPolicyHandlers(deps: PolicyRouteDeps): PolicyHandlers {
  return { get: getPolicyHandler(deps), patch: patchPolicyHandler(deps), check: checkPolicyHandler(deps) };
}
