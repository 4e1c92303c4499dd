/**
 * The node's side of the policy check of a transfer (POST /policy/check, origin/policy/routes.ts),
 * from the money runtime: the same cost and recipient rules a transfer meets (transfers.ts).
 */
import { costUnits } from "../../shared/fees.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { AppError } from "../errors.ts";
import type { TransferChecks } from "../policy/routes.ts";
import type { MoneyRuntime } from "./money-runtime.ts";
import { recipientRefusal } from "./transfers.ts";

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
