/**
 * The policy routes' handlers, over what the composition root hands them (compose.ts): the
 * enclave to seal changes with, the fees a transfer would be signed at (the check call counts a
 * transfer as its limits do, value plus the maximum fee), and x402's answer for a 402 quote.
 */
import type { Handler } from "hono";
import { costUnits } from "../../shared/fees.ts";
import type { FeeOracle } from "../chain/fees.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { checkPolicyHandler, getPolicyHandler, type PolicyRouteDeps, patchPolicyHandler } from "./routes.ts";

export type PolicyHandlers = { get: Handler<AppEnv>; patch: Handler<AppEnv>; check: Handler<AppEnv> };

export function createPolicyHandlers(deps: PolicyRouteDeps): PolicyHandlers {
  return { get: getPolicyHandler(deps), patch: patchPolicyHandler(deps), check: checkPolicyHandler(deps) };
}

/** A transfer's cost at the fees it would be quoted now, as its limits count it. */
export function transferCost(fees: FeeOracle): (amountUnits: bigint) => Promise<bigint> {
  return async (amountUnits) => {
    const quote = await fees.quote(NATIVE_TRANSFER_GAS);
    if (!quote.ok) throw new AppError("chain_unavailable", "the chain's fees could not be read; try again");
    return costUnits({ valueUnits: amountUnits, ...quote.value });
  };
}
