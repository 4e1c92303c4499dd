/**
 * An operator's approval of a held transfer, sealed in the enclave as `npm run policy -- approve`
 * does it (ops/policy.ts): signed with the operator's key over the held action, for the stack's
 * enclave, then handed over with the admin capability.
 */
import type { Address } from "viem";
import { type OperatorKey, operatorCounterNow, signOperatorApproval } from "../ops/lib/operator-key.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { heldApprovalSubject } from "../shared/operator-approval.ts";
import type { MoneyStack, StackAgent } from "./money-stack.ts";

export async function sealHeldApproval(
  stack: Pick<MoneyStack, "signer" | "authorities">,
  operator: { key: OperatorKey; keyId: string },
  agent: StackAgent,
  held: { actionId: string; to: Address; valueUnits: bigint; expiresAt: number },
) {
  const identity = await stack.signer.getSealedIdentity();
  if (!identity.ok) throw new Error("get_sealed_identity");
  const subject = {
    keyRef: agent.keyRef,
    kind: "transfer" as const,
    ref: held.actionId,
    to: held.to,
    valueUnits: held.valueUnits,
  };
  const approval = signOperatorApproval(operator.key, {
    envId: identity.value.envId,
    chainId: CHAIN_ID,
    instanceId: identity.value.instanceId,
    op: "approve_held",
    subject: heldApprovalSubject({ ...subject, instanceId: identity.value.instanceId }, held.expiresAt),
    keyId: operator.keyId,
    counter: operatorCounterNow(),
    expiresAt: Math.floor(Date.now() / 1000) + 300,
  });
  return stack.signer.approveHeld(
    { ...subject, expiresAt: held.expiresAt, operator: approval },
    stack.authorities.admin,
  );
}
