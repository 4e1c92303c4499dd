/**
 * Which signatures a transaction will need recovered, known as soon as it is decoded: its own
 * (for the sender), and for a call to NativeTransferAuth the authorization's. The chain sends
 * them to the recovery workers on arrival (signature-recovery.ts).
 */
import { createAddressFromString } from "@ethereumjs/util";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { domainSeparator } from "../../shared/eip712.ts";
import type { SupportedTx } from "../rpc/format.ts";
import { authorizationRecoveryInput } from "./precompile/native-transfer-auth.ts";
import type { RecoveryInput } from "./signature-recovery.ts";
import { senderRecoveryInput } from "./tx-admission.ts";

export type RecoveryInputsOf = (tx: SupportedTx) => RecoveryInput[];

export function createRecoveryInputs(): RecoveryInputsOf {
  const precompile = createAddressFromString(NATIVE_TRANSFER_AUTH_ADDRESS);
  const separator = domainSeparator(BigInt(CHAIN_ID), precompile.bytes);
  return (tx) => {
    const inputs: RecoveryInput[] = [];
    const sender = senderRecoveryInput(tx);
    if (sender !== undefined) inputs.push(sender);
    if (tx.to?.equals(precompile) === true) {
      const authorization = authorizationRecoveryInput(separator, tx.data);
      if (authorization !== undefined) inputs.push(authorization);
    }
    return inputs;
  };
}
