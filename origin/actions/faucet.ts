/**
 * POST /agent/v1/faucet (docs/api.md#repeats-and-limits-of-the-faucet): pays AGENT_FAUCET_PAYOUT_AMOUNT from the faucet treasury
 * (enclave `sign_faucet`) to the caller's own wallet. The cooldown and the daily limit are checked
 * under the treasury's nonce lock, which every payout takes, so simultaneous requests see each
 * other; the funding gate checks the receiving wallet and the treasury's balance.
 */
import type { Handler } from "hono";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import {
  FAUCET_REFUSAL_DETAILS,
  KEY_REFUSAL_DETAILS,
  TRANSACTION_REFUSAL_DETAILS,
} from "../../shared/enclave-protocol.ts";
import { faucetRequestSchema } from "../../shared/gateway-schemas.ts";
import { requestHash } from "../agent-actions/repository.ts";
import { secondsToNextUtcDay } from "../agent-actions/utc-day.ts";
import { AppError } from "../errors.ts";
import type { AppEnv, AuthenticatedAgent } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";
import { KEY_BINDING_MISMATCH, keyUnavailable } from "../signer/key-binding.ts";
import { refusalDetailAmong } from "../signer/refusal-detail.ts";
import type { SignerFailure } from "../signer/types.ts";
import type { MoneyServices } from "./money-services.ts";
import type { MoneyOperation, Refusal } from "./operation.ts";
import { receivingGate } from "./receiving-gate.ts";
import { runMoneyAction } from "./run-action.ts";

export function faucetHandler(services: MoneyServices): Handler<AppEnv> {
  const { payoutUnits } = services.config.faucet;
  const treasury = services.treasury;
  return async (c) => {
    const body = await parseJsonBody(c, faucetRequestSchema);
    if (!treasury) throw new AppError("feature_disabled", "the faucet has no treasury on this node");
    const agent = c.get("agent");
    const wallet = agent.assignedWallet.toLowerCase();
    return runMoneyAction(
      c,
      services,
      {
        agentId: agent.agentId,
        kind: "faucet",
        idempotencyKey: body.idempotency_key,
        requestHash: requestHash("faucet", {}),
        amountUnits: payoutUnits,
        toAddress: wallet,
      },
      (actionId) => faucetOperation(services, { actionId, agent, treasury }),
    );
  };
}

/**
 * One payout as the executor runs it: the treasury pays the agent's wallet, under the cooldown,
 * the daily limit, the treasury's balance and the funding gate of the receiving wallet.
 */
export function faucetOperation(
  services: Pick<MoneyServices, "config" | "clock">,
  params: { actionId: string; agent: AuthenticatedAgent; treasury: { address: string; keyRef: string } },
): MoneyOperation {
  const { payoutUnits, cooldownMs, dailyLimitUnits } = services.config.faucet;
  const { actionId, agent, treasury } = params;
  const wallet = agent.assignedWallet.toLowerCase();
  return {
    actionId,
    agentId: agent.agentId,
    purpose: "faucet",
    sender: treasury,
    to: wallet,
    valueUnits: payoutUnits,
    // A payout moves the treasury's money to the agent, not the agent's: no policy holds it.
    approved: false,
    signerOp: "signFaucet",
    signerRefusal: (failure) => signerRefusal(failure, { cooldownMs, now: services.clock.now() }),
    check: (facts) => {
      const { sinceLastMs, totalTodayUnits } = facts.faucet;
      const dayFull = totalTodayUnits + payoutUnits > dailyLimitUnits;
      const toNextDay = secondsToNextUtcDay(facts.now);
      const dailyLimit = () =>
        retryLater(
          "faucet_daily_limit",
          `today's faucet payouts would exceed ${dailyLimitUnits} units (the day is UTC)`,
          toNextDay,
        );
      if (sinceLastMs !== null) {
        // Measured by the database's clock, which stamps each payout, never against the origin's:
        // a host whose clock is off the database's would have the Retry-After name a time at which
        // the payout is still refused (batch-store.ts factsStatement).
        const waitSeconds = Math.ceil((cooldownMs - sinceLastMs) / 1000);
        if (waitSeconds > 0) {
          // A cooldown that ends before midnight with the day's units spent ends in a refusal by
          // the day: the answer names the day, whose end is when the payout is paid again.
          if (dayFull && waitSeconds < toNextDay) return dailyLimit();
          return retryLater(
            "faucet_cooldown",
            `the faucet pays each agent once every ${cooldownMs / 1000} s`,
            waitSeconds,
          );
        }
      }
      if (dayFull) return dailyLimit();
      if (facts.sender.balanceWei - facts.inFlightWei < facts.costWei) {
        return gateClosed("treasury_low", "the faucet treasury cannot pay out now");
      }
      const gate = receivingGate(facts.recipientGate, facts.recipientBalanceWei, payoutUnits * WEI_PER_UNIT);
      if (!gate) return null;
      return "notNow" in gate ? gate : gateClosed(gate.reason, gate.message);
    },
  };
}

function retryLater(
  code: "faucet_cooldown" | "faucet_daily_limit",
  message: string,
  seconds: number,
): Refusal {
  return { code, message, fields: { retry_after: seconds }, headers: { "Retry-After": String(seconds) } };
}

function gateClosed(reason: string, message: string): Refusal {
  return { code: "funding_gate_closed", message, fields: { reason } };
}

/** What sign_faucet is refused with: the key, the transaction's bounds, the treasury's terms. */
const SIGN_FAUCET_DETAILS = [
  ...KEY_REFUSAL_DETAILS,
  ...TRANSACTION_REFUSAL_DETAILS,
  ...FAUCET_REFUSAL_DETAILS,
];

/**
 * The enclave refused under its sealed treasury: its payout terms are this node's (money-setup.ts
 * checks at start), so each refusal gets the answer this node's own check would have given. A
 * switch over the refusal's detail (never its text), exhaustive over sign_faucet's, so a new detail
 * of its groups must be placed.
 */
function signerRefusal(failure: SignerFailure, at: { cooldownMs: number; now: Date }): Refusal | null {
  const sealed = `the faucet's sealed terms refused this payout (${failure.reason})`;
  switch (refusalDetailAmong(failure, SIGN_FAUCET_DETAILS)) {
    case "faucet_budget":
      return gateClosed("treasury_low", sealed);
    case "faucet_cooldown":
      // The enclave counts from its own signing time: at most one cooldown from now.
      return retryLater("faucet_cooldown", sealed, Math.max(1, Math.ceil(at.cooldownMs / 1000)));
    case "faucet_daily":
      return retryLater("faucet_daily_limit", sealed, secondsToNextUtcDay(at.now));
    case "faucet_recipient":
    case "key_binding":
      return KEY_BINDING_MISMATCH;
    // The node's treasury, payout, chain, gas or fees differ from the sealed ones (a policy changed
    // since start, a fee spike over the sealed ceiling): nothing about this request, nothing
    // signed; the action stays requested and a retry with its key runs it again.
    case "faucet_payout":
    case "recipient":
    case "chain":
    case "gas_limit":
    case "fee_ceiling":
      return null;
    case undefined:
      return failure.code === "key_purpose_mismatch" ? keyUnavailable("treasury") : null;
  }
}
