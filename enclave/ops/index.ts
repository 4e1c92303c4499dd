/** The op table: every op of the enclave protocol to its handler. */
import type { EnclaveOp } from "../../shared/enclave-protocol.ts";
import { getAgentPolicy, setAgentPolicy } from "./agent-policy.ts";
import {
  exportBackup,
  getSealedIdentity,
  loadRecoveryKey,
  newTransportKey,
  restoreBackup,
  verifyBackup,
} from "./backup.ts";
import { capabilityCounter } from "./capability-counter.ts";
import { configurePolicy, configureSettler, configureTreasury } from "./configure.ts";
import { configurePayee } from "./configure-payee.ts";
import { generateKeys } from "./generate-keys.ts";
import { getPolicy } from "./get-policy.ts";
import type { OpHandler } from "./handler.ts";
import { proveIdentity, publicIdentity } from "./identity.ts";
import { approveHeld, enrollOperatorKey, revokeOperatorKey, setNodeFrozen } from "./operator.ts";
import { enrollOperatorPasskey, revokeOperatorPasskey } from "./operator-passkey.ts";
import { signFiller } from "./sign-filler.ts";
import { signX402Offer, signX402Receipt } from "./sign-offer-receipt.ts";
import { signSettlement } from "./sign-settlement.ts";
import { signFaucet, signTransfer } from "./sign-transaction.ts";
import { signX402Authorization } from "./sign-x402.ts";

export const OP_HANDLERS: { [Op in EnclaveOp]: OpHandler<Op> } = {
  generate_keys: generateKeys,
  export_backup: exportBackup,
  verify_backup: verifyBackup,
  restore_backup: restoreBackup,
  load_recovery_key: loadRecoveryKey,
  new_transport_key: newTransportKey,
  get_sealed_identity: getSealedIdentity,
  configure_treasury: configureTreasury,
  configure_policy: configurePolicy,
  configure_settler: configureSettler,
  configure_payee: configurePayee,
  public_identity: publicIdentity,
  prove_identity: proveIdentity,
  sign_transfer: signTransfer,
  sign_faucet: signFaucet,
  sign_x402_authorization: signX402Authorization,
  sign_settlement: signSettlement,
  sign_filler: signFiller,
  sign_x402_offer: signX402Offer,
  sign_x402_receipt: signX402Receipt,
  capability_counter: capabilityCounter,
  get_policy: getPolicy,
  enroll_operator_key: enrollOperatorKey,
  revoke_operator_key: revokeOperatorKey,
  enroll_operator_passkey: enrollOperatorPasskey,
  revoke_operator_passkey: revokeOperatorPasskey,
  set_agent_policy: setAgentPolicy,
  set_node_frozen: setNodeFrozen,
  approve_held: approveHeld,
  get_agent_policy: getAgentPolicy,
};
