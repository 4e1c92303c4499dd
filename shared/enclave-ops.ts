/**
 * Wire schemas of the params and results of every enclave op. Wire form: snake_case
 * maps, integers that may exceed 2^53 (money, gas, nonces, timestamps) as decimal strings, byte
 * strings as lowercase 0x-hex (key_ref stays bare 64-hex, as identities store it), backup envelopes
 * as raw CBOR bytes. Params are strict: an unknown field is malformed rather than silently bound.
 * Runtime-neutral: no `node:` imports.
 */
import * as z from "zod";
import { isChecksummedOrLowerAddress } from "./address.ts";
import { instanceIdSchema } from "./capability.ts";
import { CAPABILITY_SCOPES, PRIVILEGED_OPS } from "./enclave-protocol.ts";
import { ENV_ID_PATTERN, KEY_REF_PATTERN } from "./identity-proof.ts";

export const KEY_NAMESPACES = ["agent-transfer", "faucet", "bridge-operator", "settler", "payee"] as const;
export type KeyNamespace = (typeof KEY_NAMESPACES)[number];
/** A batch is generated and exported as one unit; larger batches would approach the frame limit. */
export const MAX_BATCH_KEYS = 1000;

const hexBytes = (bytes: number) => z.string().regex(new RegExp(`^0x[0-9a-f]{${bytes * 2}}$`));
export const keyRefSchema = z.string().regex(KEY_REF_PATTERN);
/**
 * 20-byte hex; anything but all lower case must be its EIP-55 checksum. The messages say in words
 * what is expected: an agent reads them in a 400 (zod's own would quote the pattern).
 */
export const addressSchema = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, "must be a 20-byte address: 0x and 40 hex digits")
  .refine(
    (value): boolean => isChecksummedOrLowerAddress(value),
    "mixes upper and lower case but is not its EIP-55 checksum (send it checksummed or all lower case)",
  );
/** Unsigned decimal string, at most 78 digits (uint256). */
export const uintStringSchema = z
  .string()
  .regex(
    /^(0|[1-9][0-9]{0,77})$/,
    "must be a whole number as a decimal string of at most 78 digits, without sign, fraction or leading zero",
  );
export const hex32Schema = hexBytes(32);
export const publicKeySchema = z.string().regex(/^0x04[0-9a-f]{128}$/);
export const signatureSchema = hexBytes(65);
export const hexDataSchema = z.string().regex(/^0x([0-9a-f]{2})*$/);
const namespaceSchema = z.enum(KEY_NAMESPACES);
const batchIdSchema = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/);
/** Byte strings (cbor-x decodes them as Buffer, a Uint8Array). */
export const bytesSchema = z.custom<Uint8Array>((value) => value instanceof Uint8Array, "expected bytes");

const publicKeyInfoSchema = z.object({
  key_ref: keyRefSchema,
  public_key: publicKeySchema,
  address: addressSchema,
});

export const generateKeysParams = z.strictObject({
  namespace: z.enum(KEY_NAMESPACES),
  count: z.number().int().min(1).max(MAX_BATCH_KEYS),
  batch_id: batchIdSchema,
});
export const generateKeysResult = z.object({
  batch_id: batchIdSchema,
  namespace: z.enum(KEY_NAMESPACES),
  keys: z.array(publicKeyInfoSchema),
});

export const exportBackupParams = z.strictObject({
  batch_id: batchIdSchema,
  key_refs: z.array(keyRefSchema).min(1).max(MAX_BATCH_KEYS),
});
export const exportBackupResult = z.object({
  batch_id: batchIdSchema,
  envelope: bytesSchema,
  sha256: hex32Schema,
});

export const verifyBackupParams = z.strictObject({ envelope: bytesSchema });
export const verifyBackupResult = z.object({
  batch_id: batchIdSchema,
  namespace: namespaceSchema,
  keys: z.array(publicKeyInfoSchema),
});

/**
 * restore_backup (recovery tier): either a backup envelope as it is on disk, whose recovery copy
 * the enclave opens itself with the recovery key loaded by load_recovery_key (a drill, a recovery
 * from a backup folder), or a restore package, i.e. a backup's keys re-encrypted offline from the
 * recovery key to a transport key this enclave offered (new_transport_key; the air-gapped path).
 * The batch is imported into its original namespace under its original key_refs.
 */
export const restoreBackupParams = z.union([
  z.strictObject({ envelope: bytesSchema }),
  z.strictObject({ package: bytesSchema }),
]);
export const restoreBackupResult = z.object({
  batch_id: batchIdSchema,
  namespace: namespaceSchema,
  keys: z.array(publicKeyInfoSchema),
  /** Keys written by this call: 0 when the batch was already restored (idempotent). */
  imported: z.number().int().nonnegative(),
});

/**
 * load_recovery_key (recovery tier): the recovery encryption private key, HPKE-sealed
 * (shared/recovery-envelope.ts) to a transport key this enclave offered. The enclave accepts it
 * only if its public half is the recovery encryption key sealed at init, and holds it in memory
 * only, for a bounded time, to open backup envelopes given to restore_backup.
 */
export const loadRecoveryKeyParams = z.strictObject({
  transport_public_key: hexBytes(32),
  enc: hexBytes(32),
  /** The 32-byte key and the AEAD tag. */
  ct: hexBytes(48),
});
export const loadRecoveryKeyResult = z.object({
  recovery_encryption_key: hex32Schema,
  /** ISO time after which the key is forgotten (a restart forgets it sooner). */
  expires_at: z.string(),
});

/** new_transport_key (no capability): a fresh X25519 key held in memory, for one restore session. */
export const newTransportKeyParams = z.strictObject({});
export const newTransportKeyResult = z.object({
  transport_public_key: hexBytes(32),
  env_id: z.string().regex(ENV_ID_PATTERN),
  chain_id: z.number().int(),
  /** ISO time after which restore_backup no longer accepts packages sealed to it. */
  expires_at: z.string(),
});

/**
 * get_sealed_identity (no capability): what `init` sealed, all of it public, so a restore drill
 * can initialise a throwaway enclave with the same env and keys, and a minter can name this
 * enclave's instance id in its capabilities (a throwaway or a replacement has its own).
 */
export const getSealedIdentityParams = z.strictObject({});
export const getSealedIdentityResult = z.object({
  env_id: z.string().regex(ENV_ID_PATTERN),
  chain_id: z.number().int(),
  instance_id: instanceIdSchema,
  admin_authority: hex32Schema,
  policy_authority: hex32Schema,
  recovery_authority: hex32Schema,
  recovery_encryption_key: hex32Schema,
  /** Ed25519 public key that signs every backup envelope this enclave exports (a recovery checks it). */
  backup_signer: hex32Schema,
});

/** The longest faucet cooldown the enclave seals: a year, as the origin's configuration allows. */
export const MAX_FAUCET_COOLDOWN_MS = 365 * 86_400_000;

/**
 * configure_treasury (policy tier): the faucet key, a fresh budget, and the payout terms the
 * enclave enforces itself (docs/security.md: a compromised origin cannot redirect the faucet): the one
 * payout value, the cooldown between payouts to one recipient, and the units one recipient may
 * receive per UTC day.
 */
export const configureTreasuryParams = z.strictObject({
  faucet_key_ref: keyRefSchema.nullable().optional(),
  budget_units: uintStringSchema,
  payout_units: uintStringSchema,
  cooldown_ms: z.number().int().min(0).max(MAX_FAUCET_COOLDOWN_MS),
  daily_limit_units: uintStringSchema,
});
export const configureTreasuryResult = z.object({
  faucet_key_ref: keyRefSchema,
  faucet_address: addressSchema,
  budget_units: uintStringSchema,
  payout_units: uintStringSchema,
  cooldown_ms: z.number().int().nonnegative(),
  daily_limit_units: uintStringSchema,
});

/**
 * configure_settler (policy tier): the x402 settler key, generated in the `settler`
 * namespace on first use and kept afterwards, as configure_treasury makes the faucet key. With
 * settler_key_ref the settler is pointed at that key of the `settler` namespace (a settler key
 * restored after a recovery keeps its address and its gas float).
 */
export const configureSettlerParams = z.strictObject({ settler_key_ref: keyRefSchema.optional() });
export const configureSettlerResult = z.object({
  settler_key_ref: keyRefSchema,
  settler_address: addressSchema,
});

/**
 * configure_payee (policy tier): the x402 payee key, whose address is the demo's payTo and which
 * signs its offers and receipts. `init` makes one in the `payee` namespace; without payee_key_ref a
 * repeat keeps it (or makes one for a data folder initialised before payee keys existed). With
 * payee_key_ref the payee is pointed at that key of the `payee` namespace (a payee key restored
 * after a recovery keeps its address, which the sealed policy and the quote name).
 */
export const configurePayeeParams = z.strictObject({ payee_key_ref: keyRefSchema.optional() });
export const configurePayeeResult = z.object({
  payee_key_ref: keyRefSchema,
  payee_address: addressSchema,
});

export const policySchema = z.strictObject({
  per_tx_limit_units: uintStringSchema,
  daily_limit_units: uintStringSchema,
  /** null: any recipient (except the operator pool). */
  recipient_allowlist: z.array(addressSchema).max(10_000).nullable(),
  /** null: x402 authorization is not configured. */
  x402_amount_units: uintStringSchema.nullable(),
  x402_pay_to: addressSchema.nullable(),
  x402_max_timeout_seconds: z.number().int().min(1).max(86_400),
  operator_pool: addressSchema,
  /** Ceiling on one transaction's maximum fee (gas limit × max fee per gas), in wei. */
  fee_ceiling_wei: uintStringSchema,
  /**
   * Seconds an x402 authorization must still be valid, and must have been valid, at the enclave's
   * clock for sign_settlement to pay gas for it (and left valid for sign_x402_authorization to sign).
   */
  x402_validity_margin_seconds: z.number().int().min(0).max(600),
  /** x402 authorizations one key may sign per UTC day. */
  x402_daily_limit: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  /**
   * Units of fee the settler key may commit per UTC day: the maximum fee (gas limit × max fee per
   * gas, rounded up to units) of every settlement and filler it signs that day.
   */
  settler_daily_fee_units: uintStringSchema,
  /**
   * The node's x402 ceiling (docs/enclave.md#the-nodes-x402-ceiling): beside the sealed pair, a
   * payment of at most this many units may be signed, to any payee of `x402_payees`. null or
   * absent: no ceiling, only the pair. Optional so older callers and sealed states still parse.
   */
  x402_max_per_payment_units: uintStringSchema.nullable().optional(),
  /** The payees the ceiling allows; null or absent: any payee (but the operator pool's payer rule holds). */
  x402_payees: z.array(addressSchema).max(10_000).nullable().optional(),
});
export type WirePolicy = z.infer<typeof policySchema>;
export const configurePolicyParams = policySchema;
export const configurePolicyResult = policySchema;

export const treasuryStatusSchema = z.object({
  faucet_key_ref: keyRefSchema,
  faucet_address: addressSchema,
  budget_units: uintStringSchema,
  spent_units: uintStringSchema,
  // null: a treasury sealed before the enclave kept payout terms; it pays nothing until the
  // policy key configures it again with them.
  payout_units: uintStringSchema.nullable(),
  cooldown_ms: z.number().int().nonnegative().nullable(),
  daily_limit_units: uintStringSchema.nullable(),
});

/** The settler as get_policy reports it: its key, and the fee units its sealed daily budget has counted today. */
export const settlerStatusSchema = configureSettlerResult.extend({
  /** Counted against policy.settler_daily_fee_units on the enclave's current UTC day. */
  fee_spent_today_units: uintStringSchema,
});

/** get_policy (no capability): the sealed policy, so the origin can check its configuration against it. */
/** An enrolled passkey as get_policy lists it: public parts only. */
export const operatorPasskeyInfoSchema = z.object({
  key_id: z.string(),
  operator: z.string(),
  credential_id: z.string(),
  public_key: z.string(),
  rp_id: z.string(),
  origin: z.string(),
  label: z.string().nullable(),
});

export const getPolicyParams = z.strictObject({});
export const getPolicyResult = z.object({
  env_id: z.string().regex(ENV_ID_PATTERN),
  chain_id: z.number().int(),
  /** 0 until the first configure_policy; +1 on every accepted one. */
  policy_version: z.number().int().nonnegative(),
  policy: policySchema.nullable(),
  treasury: treasuryStatusSchema.nullable(),
  /** The x402 settler key, once configure_settler made it. */
  settler: settlerStatusSchema.nullable(),
  /** The x402 payee key (made at init), which signs offers and receipts; absent from older enclaves. */
  payee: configurePayeeResult.nullable().optional(),
  /** An operator froze every agent key of the node (set_node_frozen). */
  node_frozen: z.boolean(),
  /**
   * +1 each time the node is frozen (from not frozen): the freeze an unfreeze's approval names
   * (nodeFreezeSubject, freezeShown). Absent from older enclaves.
   */
  node_freeze_epoch: z.number().int().nonnegative().optional(),
  /** The enrolled operator keys (enroll_operator_key): public halves only. */
  operator_keys: z.array(
    z.object({ key_id: z.string(), public_key: z.string(), label: z.string().nullable() }),
  ),
  /** The enrolled passkeys (enroll_operator_passkey); absent from older enclaves. */
  operator_passkeys: z.array(operatorPasskeyInfoSchema).optional(),
  /** The revoked operator keys (revoke_operator_key); absent from older enclaves. */
  revoked_operator_keys: z
    .array(
      z.object({ key_id: z.string(), public_key: z.string(), revoked_at_ms: z.number().int().nonnegative() }),
    )
    .optional(),
});
export type WireGetPolicyResult = z.infer<typeof getPolicyResult>;

export const publicIdentityParams = z.strictObject({ key_ref: keyRefSchema });
export const publicIdentityResult = publicKeyInfoSchema.extend({
  namespace: namespaceSchema,
  /** The key's batch, as export_backup names it (a treasury or settler key is backed up on its own). */
  batch_id: batchIdSchema,
  env_id: z.string().regex(ENV_ID_PATTERN),
  chain_id: z.number().int(),
});

export const proveIdentityParams = z.strictObject({ key_ref: keyRefSchema, verifier_nonce: hex32Schema });
export const proveIdentityResult = publicKeyInfoSchema.extend({
  signature: signatureSchema,
  env_id: z.string().regex(ENV_ID_PATTERN),
  chain_id: z.number().int(),
});

/**
 * sign_transfer and sign_faucet: the enclave builds the EIP-1559 transaction from these fields.
 * `from` is the address the caller believes the key has (the identity's assigned wallet, the
 * treasury's address): a key whose address differs is refused (key binding).
 */
export const signTransactionParams = z.strictObject({
  key_ref: keyRefSchema,
  from: addressSchema,
  chain_id: z.number().int().nonnegative(),
  to: addressSchema,
  value_units: uintStringSchema,
  nonce: uintStringSchema,
  max_fee_per_gas: uintStringSchema,
  max_priority_fee_per_gas: uintStringSchema,
  gas_limit: uintStringSchema,
  /**
   * sign_transfer: the action this transfer is of (the origin's action id), so an operator's
   * approval of that held action (approve_held) applies to it alone. sign_faucet ignores it.
   */
  action_id: z.string().uuid().optional(),
});
/** A UTC day as the enclave counts its daily limits by: YYYY-MM-DD. */
const utcDaySchema = z.string().regex(/^\d{4}-\d{2}-\d{2}$/);

export const signTransactionResult = z.object({
  raw_transaction: hexDataSchema,
  tx_hash: hex32Schema,
  /**
   * sign_transfer and sign_filler: the UTC day (YYYY-MM-DD) the enclave counted the transfer's cost
   * or the filler's fee on, by its clock, which the origin counts it on too (it read its own clock,
   * or its database's, a moment before or after, maybe across midnight). Absent from the other ops,
   * from a treasury filler (its budget has no day), and from an enclave older than it.
   */
  counted_on: utcDaySchema.optional(),
});

/** `from`: the identity's assigned wallet, which must be the key's address (as for sign_transfer). */
export const signX402AuthorizationParams = z.strictObject({
  key_ref: keyRefSchema,
  from: addressSchema,
  to: addressSchema,
  value_units: uintStringSchema,
  valid_after: uintStringSchema,
  valid_before: uintStringSchema,
  nonce: hex32Schema,
});
export const signX402AuthorizationResult = z.object({
  signature: signatureSchema,
  authorization: z.object({
    from: addressSchema,
    to: addressSchema,
    value: uintStringSchema,
    valid_after: uintStringSchema,
    valid_before: uintStringSchema,
    nonce: hex32Schema,
  }),
  /**
   * The UTC day (YYYY-MM-DD) the enclave counted the authorization on, by its clock: the gateway
   * counts it on the same day, though it read its own clock a moment earlier, maybe before midnight.
   * Absent from an enclave older than it (the gateway then counts on its own day).
   */
  counted_on: utcDaySchema.optional(),
});

/**
 * sign_settlement (settler key only): the enclave builds the precompile's
 * transferWithAuthorization call, value 0, from these authorization fields and signature, so the
 * settler key can pay gas and nothing else; and only for an authorization `from` signed, under the
 * sealed x402 terms, valid at the enclave's clock with the sealed margin, within the settler's
 * sealed fee budget of the day.
 */
export const signSettlementParams = z.strictObject({
  key_ref: keyRefSchema,
  chain_id: z.number().int().nonnegative(),
  authorization: z.strictObject({
    from: addressSchema,
    to: addressSchema,
    value: uintStringSchema,
    valid_after: uintStringSchema,
    valid_before: uintStringSchema,
    nonce: hex32Schema,
  }),
  signature: signatureSchema,
  nonce: uintStringSchema,
  max_fee_per_gas: uintStringSchema,
  max_priority_fee_per_gas: uintStringSchema,
  gas_limit: uintStringSchema,
});
export const signSettlementResult = signTransactionResult;

/**
 * sign_filler: a zero-value transfer from the key's address to itself at `nonce`, gas 21000, so a
 * nonce the chain refused (or left stuck) can be used up and the sender's later transactions mined.
 * It moves nothing anywhere; it is signed only at a nonce the enclave signed a transaction of this
 * key at, once per key and nonce; its fee is under the sealed ceiling and counted as the key's other
 * transactions count it (an agent key's daily limit, the treasury's budget, the settler's fee
 * budget of the day).
 */
export const signFillerParams = z.strictObject({
  key_ref: keyRefSchema,
  from: addressSchema,
  chain_id: z.number().int().nonnegative(),
  nonce: uintStringSchema,
  max_fee_per_gas: uintStringSchema,
  max_priority_fee_per_gas: uintStringSchema,
});
export const signFillerResult = signTransactionResult;

/** The offer-receipt extension's payload version the enclave signs (docs/x402.md#offers-and-receipts). */
export const OFFER_RECEIPT_VERSION = 1;

/**
 * sign_x402_offer: the payee key signs the EIP-712 `Offer` of the offer-receipt extension, and
 * nothing but that type. The terms must be the node's sealed x402 terms (scheme exact, the sealed
 * chain's network, the precompile's asset, the sealed amount, payTo the payee key and the sealed
 * payTo); the enclave sets validUntil from its own clock, at most the sealed maximum validity
 * ahead. resource_url is the origin's name for its resource, which the enclave cannot check.
 */
export const signX402OfferParams = z.strictObject({
  payee_address: addressSchema,
  resource_url: z.string().min(1).max(2048),
  scheme: z.string().min(1).max(32),
  network: z.string().min(1).max(64),
  asset: addressSchema,
  pay_to: addressSchema,
  amount: uintStringSchema,
  valid_for_seconds: z.number().int().min(1).max(86_400),
});
export const signX402OfferResult = z.object({
  payload: z.object({
    version: z.number().int(),
    resource_url: z.string(),
    scheme: z.string(),
    network: z.string(),
    asset: z.string(),
    pay_to: z.string(),
    amount: uintStringSchema,
    valid_until: z.number().int().nonnegative(),
  }),
  signature: signatureSchema,
});

/**
 * sign_x402_receipt: the payee key signs the EIP-712 `Receipt` of the offer-receipt extension for
 * one settlement transaction the settler key signed in this enclave (sign_settlement), paying the
 * payee key, by `payer`. The enclave sets issuedAt from its own clock and names the transaction.
 */
export const signX402ReceiptParams = z.strictObject({
  payee_address: addressSchema,
  resource_url: z.string().min(1).max(2048),
  network: z.string().min(1).max(64),
  payer: addressSchema,
  transaction: hex32Schema,
});
export const signX402ReceiptResult = z.object({
  payload: z.object({
    version: z.number().int(),
    network: z.string(),
    resource_url: z.string(),
    payer: z.string(),
    issued_at: z.number().int().nonnegative(),
    transaction: hex32Schema,
  }),
  signature: signatureSchema,
});

export const capabilityCounterParams = z.strictObject({
  authority: hex32Schema,
  scope: z.enum(CAPABILITY_SCOPES),
  op: z.enum(PRIVILEGED_OPS as [string, ...string[]]),
});
export const capabilityCounterResult = z.object({ next_counter: z.number().int().positive() });

/** An enrolled operator key's id: short, printable, no spaces. */
export const OPERATOR_KEY_ID_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * An operator approval on the wire (shared/operator-approval.ts builds what it signs), as the ops
 * that loosen, unfreeze or approve carry it in `operator`.
 */
const approvalHead = {
  key_id: z.string().regex(OPERATOR_KEY_ID_PATTERN),
  counter: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  /** Unix seconds. */
  expires_at: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
};
/** Lowercase 0x-hex of at least `min` and at most `max` bytes. */
const hexSpan = (min: number, max: number) =>
  z
    .string()
    .regex(/^0x(?:[0-9a-f]{2})*$/)
    .min(2 + 2 * min)
    .max(2 + 2 * max);

/** An operator key's approval: its P-256 signature over operatorApprovalMessage. */
export const keyApprovalSchema = z.strictObject({
  ...approvalHead,
  /** IEEE-P1363 r‖s, 64 bytes. */
  signature: z.string().regex(/^0x[0-9a-f]{128}$/),
  /** set_agent_policy only: agentPolicySubject of the policy the approval replaces, as signed. */
  policy_before: z
    .string()
    .regex(/^0x[0-9a-f]{64}$/)
    .optional(),
});
/**
 * A passkey's approval: a WebAuthn assertion whose challenge is passkeyChallenge
 * (shared/passkey-approval.ts), each part as the authenticator made it, in 0x-hex.
 */
export const passkeyApprovalSchema = z.strictObject({
  ...approvalHead,
  webauthn: z.strictObject({
    /** rpIdHash ‖ flags ‖ signCount ‖ (extensions). */
    authenticator_data: hexSpan(37, 1024),
    /** The UTF-8 bytes of clientDataJSON, exactly as signed. */
    client_data_json: hexSpan(2, 4096),
    /** DER ECDSA P-256 over authenticator_data ‖ SHA-256(client_data_json); low-S. */
    signature: hexSpan(8, 72),
  }),
});
/**
 * An operator approval on the wire (shared/operator-approval.ts and passkey-approval.ts build what
 * is signed), as the ops that loosen, unfreeze or approve carry it in `operator`. One approval
 * today; a quorum would carry a list of them here.
 */
export const operatorApprovalSchema = z.union([keyApprovalSchema, passkeyApprovalSchema]);
export type WireKeyApproval = z.infer<typeof keyApprovalSchema>;
export type WirePasskeyApproval = z.infer<typeof passkeyApprovalSchema>;
export type WireOperatorApproval = z.infer<typeof operatorApprovalSchema>;

/** An uncompressed P-256 public key: 0x04 ‖ X ‖ Y (65 bytes). */
export const p256PublicKeySchema = z.string().regex(/^0x04[0-9a-f]{128}$/);
const operatorKeyIdSchema = z.string().regex(OPERATOR_KEY_ID_PATTERN);

/**
 * An agent policy document on the wire. The enclave parses it with shared/agent-policy.ts's
 * agentPolicySchema in the op (a document that does not parse is `malformed`); here it is only an
 * object, since that module builds on this one's address and amount schemas.
 */
const agentPolicyDocumentWire = z.record(z.string(), z.unknown());

/**
 * enroll_operator_key (policy tier): a P-256 key whose signatures approve what loosens an agent's
 * policy, unfreezes the node or approves a held action. An id is enrolled once (re-enrolling it
 * with another key is malformed; with the same key, idempotent).
 */
export const enrollOperatorKeyParams = z.strictObject({
  key_id: operatorKeyIdSchema,
  public_key: p256PublicKeySchema,
  label: z.string().max(128).optional(),
});
export const enrollOperatorKeyResult = z.object({
  key_id: operatorKeyIdSchema,
  public_key: p256PublicKeySchema,
});

/**
 * revoke_operator_key (admin tier): an enrolled operator key approves nothing from now on, and its
 * key id and public key are never enrolled again; revoking a revoked key answers as the first
 * revoke did. Approvals it signed that the enclave sealed before (a held action's) stay.
 */
export const revokeOperatorKeyParams = z.strictObject({ key_id: operatorKeyIdSchema });
export const revokeOperatorKeyResult = z.object({
  key_id: operatorKeyIdSchema,
  public_key: p256PublicKeySchema,
  /** When the enclave revoked it (unix ms of its clock); the first revoke's time, on a repeat. */
  revoked_at_ms: z.number().int().nonnegative(),
});

/** An operator's name as passkeys carry it: 1 to 64 characters, no control character. */
export const operatorNameSchema = z
  .string()
  .min(1)
  .max(64)
  .refine((name) => ![...name].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f), {
    message: "no control characters",
  });
/** A WebAuthn credential id, unpadded base64url (at most 1023 bytes). */
export const CREDENTIAL_ID_PATTERN = /^[A-Za-z0-9_-]{16,1364}$/;

/**
 * enroll_operator_passkey (policy tier): a WebAuthn passkey of a named operator, whose assertions
 * approve what an operator key's signatures do. The policy authority's capability binds every field
 * (credential id, public key, rpId, origin, operator), so the origin cannot enroll one. Key ids are
 * shared with operator keys: an id names one key or one passkey for good.
 */
export const enrollOperatorPasskeyParams = z.strictObject({
  key_id: operatorKeyIdSchema,
  operator: operatorNameSchema,
  credential_id: z.string().regex(CREDENTIAL_ID_PATTERN),
  public_key: p256PublicKeySchema,
  /** The WebAuthn relying party id (a host name, e.g. "localhost" or "console.example.com"). */
  rp_id: z.string().min(1).max(253),
  /** The console's origin the browser reports in clientDataJSON (e.g. "https://console.example.com"). */
  origin: z.string().min(1).max(256),
  label: z.string().max(128).optional(),
});
export const enrollOperatorPasskeyResult = z.object({
  key_id: operatorKeyIdSchema,
  credential_id: z.string(),
  public_key: p256PublicKeySchema,
});

/**
 * revoke_operator_passkey (admin tier): an enrolled passkey approves nothing from now on, and its key
 * id and credential are never enrolled again. The capability binds both, so it revokes that one
 * credential; revoking a revoked passkey answers as the first revoke did.
 */
export const revokeOperatorPasskeyParams = z.strictObject({
  key_id: operatorKeyIdSchema,
  credential_id: z.string().regex(CREDENTIAL_ID_PATTERN),
});
export const revokeOperatorPasskeyResult = z.object({
  key_id: operatorKeyIdSchema,
  credential_id: z.string(),
  operator: z.string(),
  /** When the enclave revoked it (unix ms of its clock); the first revoke's time, on a repeat. */
  revoked_at_ms: z.number().int().nonnegative(),
});

/**
 * set_agent_policy (admin tier): an agent-transfer key's spending policy, or null for none. What
 * loosens the key's current policy needs `operator`, an approval of agentPolicySubject(key_ref, policy)
 * over the policy the enclave holds now (an operator key's `policy_before`, a passkey's `before`).
 */
export const setAgentPolicyParams = z.strictObject({
  key_ref: keyRefSchema,
  policy: agentPolicyDocumentWire.nullable(),
  operator: operatorApprovalSchema.optional(),
});
export const setAgentPolicyResult = z.object({
  key_ref: keyRefSchema,
  policy: agentPolicyDocumentWire.nullable(),
  /** Per key: +1 on every accepted change. */
  version: z.number().int().nonnegative(),
});

/**
 * set_node_frozen (admin tier): freezing needs the admin capability alone, unfreezing an operator
 * too. `freeze_epoch` comes with `operator` and only with it: the node's freeze epoch the approval
 * was signed over (nodeFreezeSubject, freezeShown), taken only while that very freeze holds.
 */
export const setNodeFrozenParams = z.strictObject({
  frozen: z.boolean(),
  freeze_epoch: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
  operator: operatorApprovalSchema.optional(),
});
export const setNodeFrozenResult = z.object({ frozen: z.boolean() });

/** The longest an approval of a held action waits to be used. */
export const MAX_HELD_APPROVAL_SECONDS = 7 * 86_400;

/**
 * approve_held (admin tier, with an operator approval of heldActionSubject): the enclave will sign
 * that one held action once, until `expires_at` (unix seconds, at most 7 days ahead).
 */
export const approveHeldParams = z.strictObject({
  key_ref: keyRefSchema,
  kind: z.enum(["transfer", "x402"]),
  /** The transfer's action id (uuid) or the x402 authorization's nonce (hex32), by `kind`. */
  ref: z.string().min(1).max(66),
  to: addressSchema,
  value_units: uintStringSchema,
  expires_at: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  operator: operatorApprovalSchema,
});
export const approveHeldResult = z.object({ approval: hex32Schema });

/** get_agent_policy (no capability): a key's policy, its version, what it used, and the node's freeze. */
export const getAgentPolicyParams = z.strictObject({ key_ref: keyRefSchema });
export const getAgentPolicyResult = z.object({
  key_ref: keyRefSchema,
  policy: agentPolicyDocumentWire.nullable(),
  version: z.number().int().nonnegative(),
  usage: z.object({
    /** The enclave's UTC day and month the figures are of. */
    day: z.string(),
    month: z.string(),
    transfers: z.object({
      day_units: uintStringSchema,
      month_units: uintStringSchema,
      day_count: z.number().int().nonnegative(),
    }),
    x402: z.object({
      day_units: uintStringSchema,
      day_count: z.number().int().nonnegative(),
      payees: z.record(z.string(), uintStringSchema),
    }),
  }),
  node_frozen: z.boolean(),
});

/** Params and result schema of each op, keyed by op name. */
export const ENCLAVE_OP_SCHEMAS = {
  generate_keys: { params: generateKeysParams, result: generateKeysResult },
  export_backup: { params: exportBackupParams, result: exportBackupResult },
  verify_backup: { params: verifyBackupParams, result: verifyBackupResult },
  restore_backup: { params: restoreBackupParams, result: restoreBackupResult },
  load_recovery_key: { params: loadRecoveryKeyParams, result: loadRecoveryKeyResult },
  new_transport_key: { params: newTransportKeyParams, result: newTransportKeyResult },
  get_sealed_identity: { params: getSealedIdentityParams, result: getSealedIdentityResult },
  configure_treasury: { params: configureTreasuryParams, result: configureTreasuryResult },
  configure_policy: { params: configurePolicyParams, result: configurePolicyResult },
  configure_settler: { params: configureSettlerParams, result: configureSettlerResult },
  configure_payee: { params: configurePayeeParams, result: configurePayeeResult },
  public_identity: { params: publicIdentityParams, result: publicIdentityResult },
  prove_identity: { params: proveIdentityParams, result: proveIdentityResult },
  sign_transfer: { params: signTransactionParams, result: signTransactionResult },
  sign_faucet: { params: signTransactionParams, result: signTransactionResult },
  sign_x402_authorization: { params: signX402AuthorizationParams, result: signX402AuthorizationResult },
  sign_settlement: { params: signSettlementParams, result: signSettlementResult },
  sign_filler: { params: signFillerParams, result: signFillerResult },
  sign_x402_offer: { params: signX402OfferParams, result: signX402OfferResult },
  sign_x402_receipt: { params: signX402ReceiptParams, result: signX402ReceiptResult },
  capability_counter: { params: capabilityCounterParams, result: capabilityCounterResult },
  get_policy: { params: getPolicyParams, result: getPolicyResult },
  enroll_operator_key: { params: enrollOperatorKeyParams, result: enrollOperatorKeyResult },
  revoke_operator_key: { params: revokeOperatorKeyParams, result: revokeOperatorKeyResult },
  enroll_operator_passkey: { params: enrollOperatorPasskeyParams, result: enrollOperatorPasskeyResult },
  revoke_operator_passkey: { params: revokeOperatorPasskeyParams, result: revokeOperatorPasskeyResult },
  set_agent_policy: { params: setAgentPolicyParams, result: setAgentPolicyResult },
  set_node_frozen: { params: setNodeFrozenParams, result: setNodeFrozenResult },
  approve_held: { params: approveHeldParams, result: approveHeldResult },
  get_agent_policy: { params: getAgentPolicyParams, result: getAgentPolicyResult },
} as const;

export type EnclaveOpSchemas = typeof ENCLAVE_OP_SCHEMAS;
export type WireParams<Op extends keyof EnclaveOpSchemas> = z.infer<EnclaveOpSchemas[Op]["params"]>;
export type WireResult<Op extends keyof EnclaveOpSchemas> = z.infer<EnclaveOpSchemas[Op]["result"]>;
