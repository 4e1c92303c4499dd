/**
 * The origin's narrow view of the enclave signer: one method per op, each returning a SignerResult
 * whose failure carries a finding's class (docs/operations.md#what-a-finding-means). Amounts are
 * bigint; the client converts to the snake_case wire form.
 */
import type { Address } from "viem";
import type { AgentPolicyDocument } from "../../shared/agent-policy.ts";
import type { Capability } from "../../shared/capability.ts";
import type { TransferWithAuthorizationMessage } from "../../shared/eip712.ts";
import type { KeyNamespace } from "../../shared/enclave-ops.ts";
import type { CapabilityScope, PrivilegedOp, RefusalDetail } from "../../shared/enclave-protocol.ts";
import type { Hex } from "../../shared/hex.ts";
import type { OperatorApproval } from "../../shared/operator-approval.ts";
import type { Result } from "../../shared/result.ts";

export type SignerFailureClass =
  | "retryable"
  | "terminal_config"
  | "terminal_wire"
  | "terminal_agent"
  | "terminal_malformed"
  | "terminal_unknown";

/**
 * `detail` names the sealed bound behind an enclave refusal (shared/enclave-protocol.ts
 * REFUSAL_DETAILS): callers switch on it, never on `reason`, which is text for people.
 */
export type SignerFailure = {
  class: SignerFailureClass;
  code: string;
  reason: string;
  detail?: RefusalDetail;
  /** The agent policy's rule behind policy_denied, policy_held or operator_required. */
  rule?: string;
};

export type SignerResult<T> = Result<T, SignerFailure>;

/**
 * Supplies the capability for one privileged request, given the exact wire params it must bind.
 * The origin's provider mints from the admin authority key (capability-minter.ts); the operator's
 * tools mint from the policy or recovery key, or return a capability minted offline.
 */
export type CapabilityProvider = (request: {
  op: PrivilegedOp;
  params: Record<string, unknown>;
}) => Promise<SignerResult<Capability>>;

export type KeyPublicInfo = { keyRef: string; publicKey: Hex; address: Address };

export type GenerateKeysParams = { namespace: KeyNamespace; count: number; batchId: string };
export type GenerateKeysResult = { batchId: string; namespace: KeyNamespace; keys: KeyPublicInfo[] };

export type ExportBackupParams = { batchId: string; keyRefs: string[] };
export type ExportBackupResult = { batchId: string; envelope: Uint8Array; sha256: Hex };

export type VerifyBackupParams = { envelope: Uint8Array };
export type VerifyBackupResult = { batchId: string; namespace: string; keys: KeyPublicInfo[] };

/**
 * A backup envelope as it is on disk, opened by the enclave with the recovery key it holds
 * (loadRecoveryKey), or a restore package (shared/recovery-envelope.ts) sealed to one of the
 * enclave's transport keys.
 */
export type RestoreBackupParams = { envelope: Uint8Array } | { package: Uint8Array };
export type RestoreBackupResult = {
  batchId: string;
  namespace: KeyNamespace;
  keys: KeyPublicInfo[];
  /** Keys this call wrote; 0 when the batch was already restored. */
  imported: number;
};

/** The recovery encryption private key, HPKE-sealed to one of the enclave's transport keys. */
export type LoadRecoveryKeyParams = { transportPublicKey: Hex; enc: Hex; ct: Hex };
export type LoadRecoveryKeyResult = { recoveryEncryptionKey: Hex; expiresAt: string };

export type NewTransportKeyResult = {
  transportPublicKey: Hex;
  envId: string;
  chainId: number;
  expiresAt: string;
};

/** What `init` sealed: all public. */
export type SealedIdentity = {
  envId: string;
  chainId: number;
  /** This enclave instance's own id: every capability for it must name it. */
  instanceId: string;
  adminAuthority: Hex;
  policyAuthority: Hex;
  recoveryAuthority: Hex;
  recoveryEncryptionKey: Hex;
  /** Ed25519 public key that signs this enclave's backup envelopes. */
  backupSigner: Hex;
};

/** What sign_faucet pays and how often, sealed with the treasury. */
export type FaucetTerms = {
  payoutUnits: bigint;
  cooldownMs: number;
  /** Units one recipient may receive per UTC day. */
  dailyLimitUnits: bigint;
};
export type ConfigureTreasuryParams = FaucetTerms & { faucetKeyRef?: string; budgetUnits: bigint };
export type ConfigureTreasuryResult = FaucetTerms & {
  faucetKeyRef: string;
  faucetAddress: Address;
  budgetUnits: bigint;
};

export type SignerPolicy = {
  perTxLimitUnits: bigint;
  dailyLimitUnits: bigint;
  recipientAllowlist: Address[] | null;
  x402AmountUnits: bigint | null;
  x402PayTo: Address | null;
  x402MaxTimeoutSeconds: number;
  operatorPool: Address;
  /** Ceiling on one transaction's gas limit × max fee per gas, in wei. */
  feeCeilingWei: bigint;
  /** Seconds an x402 authorization must be valid on each side of the enclave's now to settle. */
  x402ValidityMarginSeconds: number;
  /** x402 authorizations one key may sign per UTC day. */
  x402DailyLimit: number;
  /** Units of fee (maximum fees, rounded up) the settler may commit per UTC day. */
  settlerDailyFeeUnits: bigint;
  /**
   * The node's x402 ceiling: beside the pair, the most one payment may be (null or absent: none).
   * Optional, so a policy written before the ceiling existed stays one.
   */
  x402MaxPerPaymentUnits?: bigint | null;
  /** The payees the ceiling allows; null or absent: any payee. */
  x402Payees?: Address[] | null;
};
export type ConfigurePolicyParams = SignerPolicy;
export type ConfigurePolicyResult = SignerPolicy;

export type TreasuryStatus = {
  faucetKeyRef: string;
  faucetAddress: Address;
  budgetUnits: bigint;
  spentUnits: bigint;
  /** null: a treasury sealed before payout terms existed, which pays nothing until reconfigured. */
  terms: FaucetTerms | null;
};
/** The x402 settler key: pays the gas of settlements and signs nothing else. */
export type SettlerKey = { settlerKeyRef: string; settlerAddress: Address };
/** The settler key and the fee units counted today against the sealed settlerDailyFeeUnits. */
export type SettlerStatus = SettlerKey & { feeSpentTodayUnits: bigint };
/** The x402 payee key: made at the enclave's init, it signs offers and receipts and nothing else. */
export type PayeeKey = { payeeKeyRef: string; payeeAddress: Address };
/** Without payeeKeyRef the payee key is kept (or made once); with it, pointed at that key. */
export type ConfigurePayeeParams = { payeeKeyRef?: string };

/** An x402 offer for the payee key to sign (docs/x402.md#offers-and-receipts). */
export type SignX402OfferParams = {
  /** The payee key's address the caller expects (key binding). */
  payeeAddress: Address;
  resourceUrl: string;
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  amount: string;
  validForSeconds: number;
};
/** The signed offer's payload as the offer-receipt extension names its fields, and its signature. */
export type SignedX402Offer = {
  payload: {
    version: number;
    resourceUrl: string;
    scheme: string;
    network: string;
    asset: string;
    payTo: string;
    amount: string;
    validUntil: number;
  };
  signature: Hex;
};
/** A receipt for the payee key to sign: the settlement transaction the settler key signed. */
export type SignX402ReceiptParams = {
  payeeAddress: Address;
  resourceUrl: string;
  network: string;
  payer: string;
  transaction: Hex;
};
export type SignedX402Receipt = {
  payload: {
    version: number;
    network: string;
    resourceUrl: string;
    payer: string;
    issuedAt: number;
    transaction: string;
  };
  signature: Hex;
};

/** Without settlerKeyRef the settler key is made once and kept; with it, pointed at that key. */
export type ConfigureSettlerParams = { settlerKeyRef?: string };
export type ConfigureSettlerResult = SettlerKey;

/** What the enclave has sealed (docs/enclave.md): the origin reads it, never writes it. */
export type GetPolicyResult = {
  envId: string;
  chainId: number;
  /** 0 until the first configure_policy, then +1 per accepted change. */
  policyVersion: number;
  policy: SignerPolicy | null;
  treasury: TreasuryStatus | null;
  settler: SettlerStatus | null;
  /** The x402 payee key; absent from an enclave older than payee keys. */
  payee?: PayeeKey | null;
  /** Every agent key of the node is frozen (setNodeFrozen). */
  nodeFrozen: boolean;
  /**
   * +1 each time the node is frozen: the freeze an unfreeze's approval names (nodeFreezeSubject,
   * freezeShown); 0 from an enclave older than freeze epochs.
   */
  nodeFreezeEpoch: number;
  /** Enrolled operator keys, public halves only. */
  operatorKeys: OperatorKeyInfo[];
  /** Enrolled passkeys, public parts only (none from an enclave older than passkeys). */
  operatorPasskeys: OperatorPasskeyInfo[];
  /** Revoked operator keys (none from an enclave older than their revocation). */
  revokedOperatorKeys: RevokeOperatorKeyResult[];
};
export type OperatorKeyInfo = { keyId: string; publicKey: Hex; label: string | null };
export type OperatorPasskeyInfo = {
  keyId: string;
  operator: string;
  credentialId: string;
  publicKey: Hex;
  rpId: string;
  origin: string;
  label: string | null;
};
export type GetPolicyOptions = { timeoutMs?: number };

export type PublicIdentityParams = { keyRef: string };
export type PublicIdentityResult = KeyPublicInfo & {
  namespace: string;
  batchId: string;
  envId: string;
  chainId: number;
};

export type ProveIdentityParams = { keyRef: string; verifierNonce: Hex };
export type ProveIdentityResult = KeyPublicInfo & { signature: Hex; envId: string; chainId: number };

export type SignTransactionParams = {
  keyRef: string;
  /** The address the key must have (the identity's wallet, the treasury's): key binding. */
  from: Address;
  chainId: number;
  to: Address;
  /** 6-decimal units; the enclave signs value × 10^12 wei. */
  valueUnits: bigint;
  nonce: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  gasLimit: bigint;
  /**
   * signTransfer: the origin's action id, so an operator's approval of that held action
   * (approveHeld) applies to this transfer alone. sign_faucet ignores it.
   */
  actionId?: string;
};
export type SignTransactionResult = {
  rawTransaction: Hex;
  txHash: Hex;
  /**
   * sign_transfer, sign_filler: the UTC day the enclave counted its cost on, by its clock
   * (YYYY-MM-DD); else null (another op, a treasury filler, an older enclave).
   */
  countedOn: string | null;
};

export type SignX402AuthorizationParams = {
  keyRef: string;
  /** The identity's assigned wallet, which the key's address must be (key binding). */
  from: Address;
  to: Address;
  valueUnits: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
};
export type SignX402AuthorizationResult = {
  signature: Hex;
  /** The signed TransferWithAuthorization message; `value` in 6-decimal units. */
  authorization: TransferWithAuthorizationMessage;
  /** The UTC day the enclave counted it on, by its clock (YYYY-MM-DD); null from an older enclave. */
  countedOn: string | null;
};

/** sign_settlement: the enclave builds transferWithAuthorization (value 0) from these fields. */
export type SignSettlementParams = {
  keyRef: string;
  chainId: number;
  /** The payer's signed TransferWithAuthorization; `value` in 6-decimal units. */
  authorization: TransferWithAuthorizationMessage;
  /** The payer's 65-byte EIP-712 signature. */
  signature: Hex;
  nonce: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  gasLimit: bigint;
};

/**
 * sign_filler: a zero-value self-transfer at `nonce` (gas 21000), to use up a refused or stuck
 * nonce; signed only at a nonce the enclave signed a transaction of the key at, once.
 */
export type SignFillerParams = {
  keyRef: string;
  /** The address the key must have: the transaction's sender and recipient. */
  from: Address;
  chainId: number;
  nonce: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
};

export type SetAgentPolicyParams = {
  keyRef: string;
  policy: AgentPolicyDocument | null;
  /** Needed when the change loosens the key's policy (an operator's approval of agentPolicySubject). */
  operator?: OperatorApproval;
};
export type SetAgentPolicyResult = { keyRef: string; policy: AgentPolicyDocument | null; version: number };
/** `freezeEpoch` with `operator` only: the node's freeze epoch the approval was signed over. */
export type SetNodeFrozenParams = { frozen: boolean; freezeEpoch?: number; operator?: OperatorApproval };
export type SetNodeFrozenResult = { frozen: boolean };
export type EnrollOperatorKeyParams = { keyId: string; publicKey: Hex; label?: string };
export type EnrollOperatorKeyResult = { keyId: string; publicKey: Hex };
export type EnrollOperatorPasskeyParams = Omit<OperatorPasskeyInfo, "label"> & { label?: string };
export type EnrollOperatorPasskeyResult = { keyId: string; credentialId: string; publicKey: Hex };
export type RevokeOperatorKeyParams = { keyId: string };
/** A revoked operator key; `revokedAt` is the first revoke's, however often it is revoked again. */
export type RevokeOperatorKeyResult = { keyId: string; publicKey: Hex; revokedAt: Date };
export type RevokeOperatorPasskeyParams = { keyId: string; credentialId: string };
/** A revoked passkey; `revokedAt` is the first revoke's, however often it is revoked again. */
export type RevokeOperatorPasskeyResult = {
  keyId: string;
  credentialId: string;
  operator: string;
  revokedAt: Date;
};
export type ApproveHeldParams = {
  keyRef: string;
  kind: "transfer" | "x402";
  /** The held transfer's action id, or the held authorization's nonce. */
  ref: string;
  to: string;
  valueUnits: bigint;
  /** Unix seconds: when the approval lapses (at most 7 days ahead). */
  expiresAt: number;
  operator: OperatorApproval;
};
export type ApproveHeldResult = { approval: Hex };
export type GetAgentPolicyParams = { keyRef: string };
/** An agent key's sealed policy, what it used of its windows (the enclave's UTC day and month), the node's freeze. */
export type AgentPolicyStatus = {
  keyRef: string;
  policy: AgentPolicyDocument | null;
  /** 0 until the key's first policy, then +1 per accepted change. */
  version: number;
  usage: {
    day: string;
    month: string;
    transfers: { dayUnits: bigint; monthUnits: bigint; dayCount: number };
    x402: { dayUnits: bigint; dayCount: number; payees: Record<string, bigint> };
  };
  nodeFrozen: boolean;
};

export type CapabilityCounterParams = { authority: Hex; scope: CapabilityScope; op: PrivilegedOp };
export type CapabilityCounterResult = { nextCounter: number };

export interface SignerClient {
  /** Admin tier. */
  generateKeys(
    params: GenerateKeysParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<GenerateKeysResult>>;
  /** Admin tier. */
  exportBackup(
    params: ExportBackupParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<ExportBackupResult>>;
  verifyBackup(params: VerifyBackupParams): Promise<SignerResult<VerifyBackupResult>>;
  /** Recovery tier. */
  restoreBackup(
    params: RestoreBackupParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<RestoreBackupResult>>;
  /** Recovery tier: the enclave holds the recovery encryption key in memory for a while. */
  loadRecoveryKey(
    params: LoadRecoveryKeyParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<LoadRecoveryKeyResult>>;
  /** A fresh transport key of this enclave for restore packages (held in its memory). */
  newTransportKey(): Promise<SignerResult<NewTransportKeyResult>>;
  /** The sealed env, chain and public keys (no capability). */
  getSealedIdentity(): Promise<SignerResult<SealedIdentity>>;
  /** Policy tier: the operator's policy key, never the origin's (docs/enclave.md). */
  configureTreasury(
    params: ConfigureTreasuryParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<ConfigureTreasuryResult>>;
  /** Policy tier: the operator's policy key, never the origin's (docs/enclave.md). */
  configurePolicy(
    params: ConfigurePolicyParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<ConfigurePolicyResult>>;
  /** Policy tier: makes the settler key once, then returns it, or points it at a named key. */
  configureSettler(
    params: ConfigureSettlerParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<ConfigureSettlerResult>>;
  publicIdentity(params: PublicIdentityParams): Promise<SignerResult<PublicIdentityResult>>;
  proveIdentity(params: ProveIdentityParams): Promise<SignerResult<ProveIdentityResult>>;
  signTransfer(params: SignTransactionParams): Promise<SignerResult<SignTransactionResult>>;
  signFaucet(params: SignTransactionParams): Promise<SignerResult<SignTransactionResult>>;
  signX402Authorization(
    params: SignX402AuthorizationParams,
  ): Promise<SignerResult<SignX402AuthorizationResult>>;
  signSettlement(params: SignSettlementParams): Promise<SignerResult<SignTransactionResult>>;
  signFiller(params: SignFillerParams): Promise<SignerResult<SignTransactionResult>>;
  /** The payee key signs an offer over the node's sealed x402 terms. */
  signX402Offer(params: SignX402OfferParams): Promise<SignerResult<SignedX402Offer>>;
  /** The payee key signs a receipt for a settlement the settler key signed in the enclave. */
  signX402Receipt(params: SignX402ReceiptParams): Promise<SignerResult<SignedX402Receipt>>;
  /** Policy tier: keeps the payee key, or points it at a restored one. */
  configurePayee(
    params: ConfigurePayeeParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<PayeeKey>>;
  capabilityCounter(params: CapabilityCounterParams): Promise<SignerResult<CapabilityCounterResult>>;
  /** The sealed policy and treasury (no capability); `timeoutMs` overrides the request timeout. */
  getPolicy(options?: GetPolicyOptions): Promise<SignerResult<GetPolicyResult>>;
  /** Admin tier; a loosening also needs `operator` (docs/enclave.md#agent-policies-operator-keys-and-approvals). */
  setAgentPolicy(
    params: SetAgentPolicyParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<SetAgentPolicyResult>>;
  /** Admin tier; unfreezing also needs `operator`. */
  setNodeFrozen(
    params: SetNodeFrozenParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<SetNodeFrozenResult>>;
  /** Policy tier: the operator's policy key, never the origin's. */
  enrollOperatorKey(
    params: EnrollOperatorKeyParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<EnrollOperatorKeyResult>>;
  /** Policy tier: the operator's policy key, never the origin's (docs/enclave.md#passkeys). */
  enrollOperatorPasskey(
    params: EnrollOperatorPasskeyParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<EnrollOperatorPasskeyResult>>;
  /** Admin tier: revoking only tightens; a repeat answers as the first. */
  revokeOperatorKey(
    params: RevokeOperatorKeyParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<RevokeOperatorKeyResult>>;
  /** Admin tier: revoking only tightens (docs/enclave.md#passkeys); a repeat answers as the first. */
  revokeOperatorPasskey(
    params: RevokeOperatorPasskeyParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<RevokeOperatorPasskeyResult>>;
  /** Admin tier, with an operator's approval of the one held action. */
  approveHeld(
    params: ApproveHeldParams,
    authorize: CapabilityProvider,
  ): Promise<SignerResult<ApproveHeldResult>>;
  /** An agent key's policy and usage (no capability). */
  getAgentPolicy(params: GetAgentPolicyParams): Promise<SignerResult<AgentPolicyStatus>>;
  /**
   * Closes the connection; later calls of an op that would reach the enclave fail as retryable
   * `signer_client_closed` (a dormant op keeps its answer). Safe to call more than once.
   */
  close(): Promise<void>;
}
