/**
 * The x402 surfaces under {base}/x402 (docs/x402.md#the-demo-and-the-facilitator): the payee
 * side's demo resource and public facilitator (payee/), both over one runtime (setup.ts), and the
 * facilitator's discovery routes (payee/discovery.ts, a router of their own). Public:
 * no bearer token; the edge passes them through. The client is resolved as the gateway resolves
 * it, for the windows of verify, settle and the paid demo (payee/client-limit.ts) and the guard
 * against reverted settlements (payee/revert-guard.ts), both shared by the two routers, and the
 * window of the public reads (discovery, settlement status) per address; the demo
 * names itself by the URL the client requested (payee/resource-url.ts), and a settlement's status is
 * read by its payment or its transaction (payee/settlement-status.ts).
 */
import { Hono } from "hono";
import { clientIpMiddleware } from "../http/client-ip-middleware.ts";
import { createEdgeSecretVerifier } from "../http/edge-secret.ts";
import type { AppEnv } from "../http/env.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { createX402Limits, publicReadWindow } from "./payee/client-limit.ts";
import { createDemoRouter } from "./payee/demo.ts";
import { createDiscoveryRouter } from "./payee/discovery.ts";
import { createFacilitatorRouter } from "./payee/facilitator.ts";
import { createFacilitator } from "./payee/facilitator-core.ts";
import { createOfferReceipts } from "./payee/offer-receipt.ts";
import { createPayerFactsReader } from "./payee/payer-facts.ts";
import { createPublicUrlOf, createResourceUrlOf } from "./payee/resource-url.ts";
import { createRevertGuard } from "./payee/revert-guard.ts";
import { createSettlementStatusRouter } from "./payee/settlement-status.ts";
import type { ChainAuthorizationUsed } from "./payee/used-elsewhere.ts";
import type { X402Runtime } from "./setup.ts";

export type X402RouterOptions = {
  /** Told of each refusal of a window or of the revert guard (metrics). */
  refusals?: RefusalCounter;
};

/** Undefined when x402 is off or not configured: every /x402 path is then 404. */
export function createX402Router(
  deps: Infrastructure,
  runtime: X402Runtime | undefined,
  options: X402RouterOptions = {},
): Hono<AppEnv> | undefined {
  if (!runtime || !deps.rpc) return undefined;
  const { x402 } = deps.config;
  const verifyDeps = {
    db: deps.database.db,
    payerFacts: createPayerFactsReader(deps.rpc),
    now: () => deps.clock.now(),
    operatorPool: runtime.operatorPool,
    validityMarginSeconds: x402.validityMarginSeconds,
    maxValiditySeconds: x402.maxTimeoutSeconds,
  };
  // Whether the chain holds an ended settlement's authorization as used (used-elsewhere.ts).
  const authorizationUsed: ChainAuthorizationUsed = async (payer, nonce) =>
    (await verifyDeps.payerFacts(payer, nonce))?.nonceUsed;
  const limits = createX402Limits({
    perMinute: x402.rateLimitPerMinute,
    addressPaymentsPerMinute: x402.addressPaymentsPerMinute,
    readsPerMinute: x402.readsPerMinute,
    refusals: options.refusals,
  });
  const guard = createRevertGuard({
    db: deps.database.db,
    refusals: options.refusals,
    maxWaitMs: x402.receiptTimeoutMs,
    authorizationUsed,
  });
  const edgeSecret = deps.config.secrets.edgeShared;
  const verifyEdge = edgeSecret ? createEdgeSecretVerifier(edgeSecret) : undefined;
  const resourceUrlOf = createResourceUrlOf({
    publicBaseUrl: deps.config.http.publicBaseUrl,
    basePath: deps.config.http.basePath,
    verifyEdge,
  });
  const app = new Hono<AppEnv>();
  app.use("*", clientIpMiddleware(deps.config.trustedProxies, verifyEdge));
  const publicUrlOf = createPublicUrlOf(resourceUrlOf, deps.config.http.basePath);
  const facilitator = createFacilitator({
    runtime,
    verifyDeps,
    limits,
    guard,
    receiptTimeoutMs: x402.receiptTimeoutMs,
  });
  const offerReceipts = x402.offerReceipts
    ? createOfferReceipts({
        signer: deps.signer,
        requirements: runtime.requirements,
        payeeAddress: runtime.payeeAddress,
        logger: deps.logger,
        now: () => deps.clock.now(),
      })
    : undefined;
  if (!x402.offerReceipts) {
    deps.logger.info("x402 offers and receipts are off: AGENT_X402_OFFER_RECEIPTS_DISABLED is true");
  }
  app.route(
    "/demo",
    createDemoRouter({
      runtime,
      facilitator,
      resourceUrlOf,
      publicUrlOf,
      offerReceipts,
      offerSigning: (clientIp) => limits.offerSigning(clientIp),
    }),
  );
  app.route("/facilitator", createFacilitatorRouter(facilitator, publicUrlOf));
  const readWindow = publicReadWindow(limits);
  app.use("/facilitator/settlements/*", readWindow);
  app.use("/facilitator/discovery/*", readWindow);
  app.route(
    "/facilitator",
    createSettlementStatusRouter(deps.database.db, authorizationUsed, x402.validityMarginSeconds),
  );
  app.route(
    "/facilitator",
    createDiscoveryRouter({
      db: deps.database.db,
      requirements: runtime.requirements,
      resourceUrlOf,
      demoSince: deps.clock.now(),
    }),
  );
  return app;
}
