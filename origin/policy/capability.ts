/**
 * The policy routes' handlers, over what the composition root hands them (compose.ts): the
 * enclave to seal changes with, the fees a transfer would be signed at (the check call counts a
 * transfer as its limits do, value plus the maximum fee), and x402's answer for a 402 quote.
 */
import type { Handler } from "hono";
import { costUnits } from "../../shared/fees.ts";
import type { MoneyRuntime } from "../actions/money-runtime.ts";
import { recipientRefusal } from "../actions/transfers.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import {
  checkPolicyHandler,
  getPolicyHandler,
  type PolicyRouteDeps,
  patchPolicyHandler,
  type TransferChecks,
} from "./routes.ts";

export type PolicyHandlers = { get: Handler<AppEnv>; patch: Handler<AppEnv>; check: Handler<AppEnv> };

export function createPolicyHandlers(deps: PolicyRouteDeps): PolicyHandlers {
  return { get: getPolicyHandler(deps), patch: patchPolicyHandler(deps), check: checkPolicyHandler(deps) };
}

/**
 * What the check call asks of the node about a transfer: its cost at the fees it would be quoted
 * now, as its limits count it, and the node's own refusal of its recipient, whatever the policy:
 * one no transfer may have (the transfer's 400) or one off the node's allowlist (its 403).
 */
export function transferChecks(
  money: Pick<MoneyRuntime, "fees" | "operatorPool">,
  recipientAllowlist: readonly string[] | undefined,
): TransferChecks {
  const allowlist = recipientAllowlist ? new Set(recipientAllowlist) : null;
  return {
    costUnits: async (amountUnits) => {
      const quote = await money.fees.quote(NATIVE_TRANSFER_GAS);
      if (!quote.ok) throw new AppError("chain_unavailable", "the chain's fees could not be read; try again");
      return costUnits({ valueUnits: amountUnits, ...quote.value });
    },
    recipientRule: (to) => {
      if (recipientRefusal(to, money.operatorPool) !== undefined) return "node.recipient";
      return allowlist && !allowlist.has(to) ? "node.recipient_allowlist" : undefined;
    },
  };
}
