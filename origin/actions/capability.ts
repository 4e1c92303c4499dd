import type { Handler } from "hono";
import { type Capability, capability, type StartupCheck } from "../capability.ts";
import { broadcastLeaseMs } from "../chain/outgoing.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import type { GetPolicyResult, SignerResult } from "../signer/types.ts";
import type { TxTracker, TxTrackerOptions } from "../workers/tx-tracker.ts";
import type { X402Runtime } from "../x402/setup.ts";
import { createMoneyExecutor, type ExecutorDeps } from "./execute.ts";
import { faucetHandler } from "./faucet.ts";
import type { MoneyServices } from "./money-services.ts";
import { type MoneyRuntime, prepareMoney } from "./money-setup.ts";
import { createActionClaimer } from "./repository.ts";
import { transfersHandler } from "./transfers.ts";

export type MoneyModule = {
  capability: Capability;
  /** Present when a money switch is on and the configuration matched the sealed policy. */
  runtime: MoneyRuntime | undefined;
  /** The x402 runtime, built from the same sealed policy (x402/setup.ts). */
  x402: X402Runtime | undefined;
  /** The transaction tracker, when a money switch is on; started with the capability's workers. */
  tracker: TxTracker | undefined;
  /** The gateway's faucet and transfer routes of the switches that are on. */
  writes: MoneyWrites;
};

/** Handed to the gateway, which mounts them (gateway/router.ts). */
export type MoneyWrites = { faucet?: Handler<AppEnv>; transfers?: Handler<AppEnv> };

/**
 * The faucet and transfers, and the money runtime x402 settles through. Its start-up check is
 * prepareMoney's: a money switch whose limits differ from the enclave's sealed policy refuses the
 * start. Its worker is the transaction tracker; at shutdown the transfers answered `signed` leave
 * for the chain before the clients close (the next start's tracker would send them anyway, after
 * their leases ran out).
 */
export async function createMoneyModule(
  infra: Infrastructure,
  options: { tracker?: TxTrackerOptions; sealed?: SignerResult<GetPolicyResult> } = {},
): Promise<StartupCheck<MoneyModule>> {
  const prepared = await prepareMoney({
    config: infra.config,
    signer: infra.signer,
    rpc: infra.rpc,
    db: infra.database.db,
    logger: infra.logger,
    tracker: options.tracker,
    sealed: options.sealed,
  });
  if (!prepared.ok) return prepared;
  const { money, tracker } = prepared;
  return {
    ok: true,
    value: {
      capability: capability("money", {
        workers: () => {
          if (!tracker) return [];
          tracker.start();
          return [tracker];
        },
        stop: async () => {
          await money?.broadcasts.idle();
        },
      }),
      runtime: money,
      x402: prepared.x402,
      tracker,
      // The handlers exist only where the gateway mounts them (with its switch on).
      writes: infra.config.gatewayEnabled ? moneyHandlers(infra, money) : {},
    },
  };
}

/** The faucet and transfer routes of the switches that are on (and checked at start). */
function moneyHandlers(infra: Infrastructure, money: MoneyRuntime | undefined): MoneyWrites {
  if (!money || !infra.rpc) return {};
  const executorDeps: ExecutorDeps = {
    db: infra.database.db,
    rpc: infra.rpc,
    fees: money.fees,
    clock: infra.clock,
    logger: infra.logger,
    broadcasts: money.broadcasts,
    leaseMs: broadcastLeaseMs(infra.config.chain.timeoutMs),
  };
  const services: MoneyServices = {
    ...executorDeps,
    executor: createMoneyExecutor(executorDeps),
    claim: createActionClaimer(infra.database.db),
    config: infra.config,
    signer: infra.signer,
    operatorPool: money.operatorPool,
    treasury: money.treasury,
  };
  return {
    ...(infra.config.features.faucet && services.treasury ? { faucet: faucetHandler(services) } : {}),
    ...(infra.config.features.transfers ? { transfers: transfersHandler(services) } : {}),
  };
}
