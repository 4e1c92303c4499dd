/**
 * Genesis state: the operator pool funded, the marker code at the precompile address,
 * nothing else.
 */
import { Account, type Address, createAddressFromString } from "@ethereumjs/util";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { PRECOMPILE_MARKER_CODE } from "../constants.ts";
import type { TrackingStateManager } from "../state/tracking-state-manager.ts";

export type GenesisParams = { operatorPool: Address; operatorPoolBalanceWei: bigint };

export async function applyGenesisState(state: TrackingStateManager, params: GenesisParams): Promise<void> {
  await state.putAccount(params.operatorPool, new Account(0n, params.operatorPoolBalanceWei));
  // The marker makes eth_getCode show a contract, as tools expect of a token, and gives the
  // precompile an account to keep its used-authorization flags in.
  const precompile = createAddressFromString(NATIVE_TRANSFER_AUTH_ADDRESS);
  await state.putAccount(precompile, new Account());
  await state.putCode(precompile, PRECOMPILE_MARKER_CODE);
}
