/**
 * The x402 surfaces under {base}/x402 (SPEC "x402 surfaces"): the demo resource and the public
 * facilitator, both over one runtime (setup.ts). Public: no bearer token; the edge passes them through.
 */
import { Hono } from "hono";
import type { AppDeps } from "../deps.ts";
import type { AppEnv } from "../http/env.ts";
import { createDemoRouter } from "./demo.ts";
import { createFacilitatorRouter } from "./facilitator.ts";
import { createPayerFactsReader } from "./payer-facts.ts";

/** Undefined when x402 is off or not configured: every /x402 path is then 404. */
export function createX402Router(deps: AppDeps): Hono<AppEnv> | undefined {
  const runtime = deps.money?.x402;
  if (!runtime || !deps.rpc) return undefined;
  const verifyDeps = {
    db: deps.database.db,
    payerFacts: createPayerFactsReader(deps.rpc),
    now: () => deps.clock.now(),
    operatorPool: runtime.operatorPool,
  };
  const app = new Hono<AppEnv>();
  app.route("/demo", createDemoRouter(runtime, verifyDeps));
  app.route("/facilitator", createFacilitatorRouter(runtime, verifyDeps));
  return app;
}
