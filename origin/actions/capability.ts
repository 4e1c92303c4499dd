import type { Handler } from "hono";
import { createActionClaimer } from "../agent-actions/repository.ts";
import { type Capability, capability } from "../capability.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import type { Outbox } from "../outbox/index.ts";
import { startApprovedTransfers } from "./approved.ts";
import { createMoneyExecutor, type ExecutorDeps } from "./execute.ts";
import { faucetHandler } from "./faucet.ts";
import type { MoneyRuntime } from "./money-runtime.ts";
import type { MoneyServices } from "./money-services.ts";
import { transfersHandler } from "./transfers.ts";

export type MoneyModule = {
  capability: Capability;
  /** Present when a money switch is on and the configuration matched the sealed policy. */
  runtime: MoneyRuntime | undefined;
  /** The transaction tracker, when a money switch is on; started with the capability's workers. */
  tracker: Outbox["tracker"] | undefined;
  /** The gateway's faucet and transfer routes of the switches that are on. */
  writes: MoneyWrites;
};

/** Handed to the gateway, which mounts them (gateway/router.ts). */
export type MoneyWrites = { faucet?: Handler<AppEnv>; transfers?: Handler<AppEnv> };

/**
 * The faucet and transfers, over the money runtime the composition root built (compose.ts; x402
 * settles through the same outbox). Its worker is the outbox's transaction tracker; at shutdown
 * the transfers answered `signed` leave for the chain before the clients close (the next start's
 * tracker would send them anyway, after their leases ran out).
 */
export function createMoneyModule(infra: Infrastructure, money: MoneyRuntime | undefined): MoneyModule {
  const tracker = money?.outbox.tracker;
  const services = moneyServices(infra, money);
  return {
    capability: capability("money", {
      workers: () => {
        if (!tracker) return [];
        tracker.start();
        // Transfers an operator approved are signed here, whatever the gateway switch.
        const approved =
          services && infra.config.features.transfers ? [startApprovedTransfers(services, infra.logger)] : [];
        return [tracker, ...approved];
      },
      // A paid x402 request waiting for its settlement's receipt is answered settlement_pending
      // now, before the server's drain: the receipt wait may outlast it (AGENT_X402_RECEIPT_TIMEOUT_MS).
      endStreams: () => money?.outbox.releaseReceiptWaits(),
      stop: async () => {
        await money?.outbox.idle();
      },
    }),
    runtime: money,
    tracker,
    // The handlers exist only where the gateway mounts them (with its switch on).
    writes: infra.config.gatewayEnabled && services ? moneyHandlers(infra, services) : {},
  };
}

/** The money routes' services, over the runtime the start-up check built; none without one. */
function moneyServices(infra: Infrastructure, money: MoneyRuntime | undefined): MoneyServices | undefined {
  if (!money || !infra.rpc) return undefined;
  const executorDeps: ExecutorDeps = { clock: infra.clock, outbox: money.outbox };
  return {
    ...executorDeps,
    db: infra.database.db,
    executor: createMoneyExecutor(executorDeps),
    claim: createActionClaimer(infra.database.db),
    config: infra.config,
    operatorPool: money.operatorPool,
    treasury: money.treasury,
    policyDecided: (decision) => infra.metrics.policyDecided("transfer", decision),
  };
}

/** The faucet and transfer routes of the switches that are on (and checked at start). */
function moneyHandlers(infra: Infrastructure, services: MoneyServices): MoneyWrites {
  return {
    ...(infra.config.features.faucet && services.treasury ? { faucet: faucetHandler(services) } : {}),
    ...(infra.config.features.transfers ? { transfers: transfersHandler(services) } : {}),
  };
}
