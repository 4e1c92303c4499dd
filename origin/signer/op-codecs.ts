/**
 * Per-op conversion between the client's camelCase params/results (bigint amounts) and the wire
 * form of shared/enclave-ops.ts. Replies are parsed with the shared zod schemas, so a reply that
 * does not match its op never reaches a caller (parsed once at the boundary).
 */
import type { Address } from "viem";
import type * as z from "zod";
import { storedAgentPolicySchema } from "../../shared/agent-policy.ts";
import * as wire from "../../shared/enclave-ops.ts";
import type { EnclaveOp } from "../../shared/enclave-protocol.ts";
import type { Hex } from "../../shared/hex.ts";
import { operatorApprovalToWire } from "../../shared/operator-approval.ts";
import type {
  AgentPolicyStatus,
  ApproveHeldParams,
  CapabilityCounterParams,
  ConfigurePayeeParams,
  ConfigurePolicyParams,
  ConfigureSettlerParams,
  ConfigureTreasuryParams,
  EnrollOperatorKeyParams,
  EnrollOperatorPasskeyParams,
  ExportBackupParams,
  FaucetTerms,
  GenerateKeysParams,
  GetPolicyResult,
  KeyPublicInfo,
  LoadRecoveryKeyParams,
  ProveIdentityParams,
  PublicIdentityParams,
  RestoreBackupParams,
  RevokeOperatorKeyParams,
  RevokeOperatorPasskeyParams,
  SealedIdentity,
  SetAgentPolicyParams,
  SetNodeFrozenParams,
  SignerPolicy,
  SignFillerParams,
  SignSettlementParams,
  SignTransactionParams,
  SignX402AuthorizationParams,
  SignX402OfferParams,
  SignX402ReceiptParams,
  VerifyBackupParams,
} from "./types.ts";

type Codec<P, R extends z.ZodType> = { toWire: (params: P) => Record<string, unknown>; result: R };

const keyInfo = (key: { key_ref: string; public_key: string; address: string }): KeyPublicInfo => ({
  keyRef: key.key_ref,
  publicKey: key.public_key as Hex,
  address: key.address as Address,
});

const txToWire = (params: SignTransactionParams): wire.WireParams<"sign_transfer"> => ({
  key_ref: params.keyRef,
  from: params.from.toLowerCase(),
  chain_id: params.chainId,
  to: params.to,
  value_units: params.valueUnits.toString(),
  nonce: params.nonce.toString(),
  max_fee_per_gas: params.maxFeePerGas.toString(),
  max_priority_fee_per_gas: params.maxPriorityFeePerGas.toString(),
  gas_limit: params.gasLimit.toString(),
  ...(params.actionId === undefined ? {} : { action_id: params.actionId.toLowerCase() }),
});

const txResult = wire.signTransactionResult.transform((r) => ({
  rawTransaction: r.raw_transaction as Hex,
  txHash: r.tx_hash as Hex,
  countedOn: r.counted_on ?? null,
}));

const policyFromWire = (p: wire.WirePolicy): SignerPolicy => ({
  perTxLimitUnits: BigInt(p.per_tx_limit_units),
  dailyLimitUnits: BigInt(p.daily_limit_units),
  recipientAllowlist: p.recipient_allowlist as Address[] | null,
  x402AmountUnits: p.x402_amount_units === null ? null : BigInt(p.x402_amount_units),
  x402PayTo: p.x402_pay_to as Address | null,
  x402MaxTimeoutSeconds: p.x402_max_timeout_seconds,
  operatorPool: p.operator_pool as Address,
  feeCeilingWei: BigInt(p.fee_ceiling_wei),
  x402ValidityMarginSeconds: p.x402_validity_margin_seconds,
  x402DailyLimit: p.x402_daily_limit,
  settlerDailyFeeUnits: BigInt(p.settler_daily_fee_units),
  // Only when sealed, as the enclave answers them: a node without a ceiling reads as before.
  ...(p.x402_max_per_payment_units == null
    ? {}
    : { x402MaxPerPaymentUnits: BigInt(p.x402_max_per_payment_units) }),
  ...(p.x402_payees == null ? {} : { x402Payees: p.x402_payees as Address[] }),
});

/** A sealed treasury's payout terms, or null when it was sealed without them. */
function treasuryTerms(t: z.infer<typeof wire.treasuryStatusSchema>): FaucetTerms | null {
  if (t.payout_units === null || t.cooldown_ms === null || t.daily_limit_units === null) return null;
  return {
    payoutUnits: BigInt(t.payout_units),
    cooldownMs: t.cooldown_ms,
    dailyLimitUnits: BigInt(t.daily_limit_units),
  };
}

/** The client's policy in wire form (decimal strings), as configure_policy sends it and /healthz shows it. */
export function signerPolicyToWire(p: SignerPolicy): wire.WirePolicy {
  return {
    per_tx_limit_units: p.perTxLimitUnits.toString(),
    daily_limit_units: p.dailyLimitUnits.toString(),
    recipient_allowlist: p.recipientAllowlist,
    x402_amount_units: p.x402AmountUnits === null ? null : p.x402AmountUnits.toString(),
    x402_pay_to: p.x402PayTo,
    x402_max_timeout_seconds: p.x402MaxTimeoutSeconds,
    operator_pool: p.operatorPool,
    fee_ceiling_wei: p.feeCeilingWei.toString(),
    x402_validity_margin_seconds: p.x402ValidityMarginSeconds,
    x402_daily_limit: p.x402DailyLimit,
    settler_daily_fee_units: p.settlerDailyFeeUnits.toString(),
    // Sent only when set: a policy without a ceiling binds the same params as before it existed.
    ...(p.x402MaxPerPaymentUnits == null
      ? {}
      : { x402_max_per_payment_units: p.x402MaxPerPaymentUnits.toString() }),
    ...(p.x402Payees == null ? {} : { x402_payees: p.x402Payees }),
  };
}

/** get_policy's result back in wire form (for /healthz and the operator CLI's JSON). */
export function getPolicyResultToWire(r: GetPolicyResult): wire.WireGetPolicyResult {
  return {
    env_id: r.envId,
    chain_id: r.chainId,
    policy_version: r.policyVersion,
    policy: r.policy === null ? null : signerPolicyToWire(r.policy),
    treasury:
      r.treasury === null
        ? null
        : {
            faucet_key_ref: r.treasury.faucetKeyRef,
            faucet_address: r.treasury.faucetAddress,
            budget_units: r.treasury.budgetUnits.toString(),
            spent_units: r.treasury.spentUnits.toString(),
            payout_units: r.treasury.terms?.payoutUnits.toString() ?? null,
            cooldown_ms: r.treasury.terms?.cooldownMs ?? null,
            daily_limit_units: r.treasury.terms?.dailyLimitUnits.toString() ?? null,
          },
    settler:
      r.settler === null
        ? null
        : {
            settler_key_ref: r.settler.settlerKeyRef,
            settler_address: r.settler.settlerAddress,
            fee_spent_today_units: r.settler.feeSpentTodayUnits.toString(),
          },
    ...(r.payee
      ? { payee: { payee_key_ref: r.payee.payeeKeyRef, payee_address: r.payee.payeeAddress } }
      : {}),
    node_frozen: r.nodeFrozen,
    node_freeze_epoch: r.nodeFreezeEpoch,
    operator_keys: r.operatorKeys.map((key) => ({
      key_id: key.keyId,
      public_key: key.publicKey,
      label: key.label,
    })),
    revoked_operator_keys: r.revokedOperatorKeys.map((revoked) => ({
      key_id: revoked.keyId,
      public_key: revoked.publicKey,
      revoked_at_ms: revoked.revokedAt.getTime(),
    })),
    operator_passkeys: r.operatorPasskeys.map((passkey) => ({
      key_id: passkey.keyId,
      operator: passkey.operator,
      credential_id: passkey.credentialId,
      public_key: passkey.publicKey,
      rp_id: passkey.rpId,
      origin: passkey.origin,
      label: passkey.label,
    })),
  };
}

/**
 * A policy document as the enclave answers it: what it holds sealed, which an earlier release may
 * have sealed with more than a change takes now (shared/agent-policy.ts storedAgentPolicySchema).
 */
const policyDocument = storedAgentPolicySchema.nullable();

export const OP_CODECS = {
  generate_keys: {
    toWire: (p: GenerateKeysParams) => ({ namespace: p.namespace, count: p.count, batch_id: p.batchId }),
    result: wire.generateKeysResult.transform((r) => ({
      batchId: r.batch_id,
      namespace: r.namespace,
      keys: r.keys.map(keyInfo),
    })),
  },
  export_backup: {
    toWire: (p: ExportBackupParams) => ({ batch_id: p.batchId, key_refs: p.keyRefs }),
    result: wire.exportBackupResult.transform((r) => ({
      batchId: r.batch_id,
      envelope: new Uint8Array(r.envelope),
      sha256: r.sha256 as Hex,
    })),
  },
  verify_backup: {
    toWire: (p: VerifyBackupParams) => ({ envelope: p.envelope }),
    result: wire.verifyBackupResult.transform((r) => ({
      batchId: r.batch_id,
      namespace: r.namespace,
      keys: r.keys.map(keyInfo),
    })),
  },
  restore_backup: {
    toWire: (p: RestoreBackupParams) => ("envelope" in p ? { envelope: p.envelope } : { package: p.package }),
    result: wire.restoreBackupResult.transform((r) => ({
      batchId: r.batch_id,
      namespace: r.namespace,
      keys: r.keys.map(keyInfo),
      imported: r.imported,
    })),
  },
  load_recovery_key: {
    toWire: (p: LoadRecoveryKeyParams) => ({
      transport_public_key: p.transportPublicKey.toLowerCase(),
      enc: p.enc.toLowerCase(),
      ct: p.ct.toLowerCase(),
    }),
    result: wire.loadRecoveryKeyResult.transform((r) => ({
      recoveryEncryptionKey: r.recovery_encryption_key as Hex,
      expiresAt: r.expires_at,
    })),
  },
  new_transport_key: {
    toWire: (_: Record<string, never>) => ({}),
    result: wire.newTransportKeyResult.transform((r) => ({
      transportPublicKey: r.transport_public_key as Hex,
      envId: r.env_id,
      chainId: r.chain_id,
      expiresAt: r.expires_at,
    })),
  },
  get_sealed_identity: {
    toWire: (_: Record<string, never>) => ({}),
    result: wire.getSealedIdentityResult.transform(
      (r): SealedIdentity => ({
        envId: r.env_id,
        chainId: r.chain_id,
        instanceId: r.instance_id,
        adminAuthority: r.admin_authority as Hex,
        policyAuthority: r.policy_authority as Hex,
        recoveryAuthority: r.recovery_authority as Hex,
        recoveryEncryptionKey: r.recovery_encryption_key as Hex,
        backupSigner: r.backup_signer as Hex,
      }),
    ),
  },
  configure_treasury: {
    toWire: (p: ConfigureTreasuryParams) => ({
      ...(p.faucetKeyRef === undefined ? {} : { faucet_key_ref: p.faucetKeyRef }),
      budget_units: p.budgetUnits.toString(),
      payout_units: p.payoutUnits.toString(),
      cooldown_ms: p.cooldownMs,
      daily_limit_units: p.dailyLimitUnits.toString(),
    }),
    result: wire.configureTreasuryResult.transform((r) => ({
      faucetKeyRef: r.faucet_key_ref,
      faucetAddress: r.faucet_address as Address,
      budgetUnits: BigInt(r.budget_units),
      payoutUnits: BigInt(r.payout_units),
      cooldownMs: r.cooldown_ms,
      dailyLimitUnits: BigInt(r.daily_limit_units),
    })),
  },
  configure_settler: {
    toWire: (p: ConfigureSettlerParams) =>
      p.settlerKeyRef === undefined ? {} : { settler_key_ref: p.settlerKeyRef },
    result: wire.configureSettlerResult.transform((r) => ({
      settlerKeyRef: r.settler_key_ref,
      settlerAddress: r.settler_address as Address,
    })),
  },
  configure_payee: {
    toWire: (p: ConfigurePayeeParams) =>
      p.payeeKeyRef === undefined ? {} : { payee_key_ref: p.payeeKeyRef },
    result: wire.configurePayeeResult.transform((r) => ({
      payeeKeyRef: r.payee_key_ref,
      payeeAddress: r.payee_address as Address,
    })),
  },
  sign_x402_offer: {
    toWire: (p: SignX402OfferParams): wire.WireParams<"sign_x402_offer"> => ({
      payee_address: p.payeeAddress.toLowerCase(),
      resource_url: p.resourceUrl,
      scheme: p.scheme,
      network: p.network,
      asset: p.asset,
      pay_to: p.payTo,
      amount: p.amount,
      valid_for_seconds: p.validForSeconds,
    }),
    result: wire.signX402OfferResult.transform((r) => ({
      payload: {
        version: r.payload.version,
        resourceUrl: r.payload.resource_url,
        scheme: r.payload.scheme,
        network: r.payload.network,
        asset: r.payload.asset,
        payTo: r.payload.pay_to,
        amount: r.payload.amount,
        validUntil: r.payload.valid_until,
      },
      signature: r.signature as Hex,
    })),
  },
  sign_x402_receipt: {
    toWire: (p: SignX402ReceiptParams): wire.WireParams<"sign_x402_receipt"> => ({
      payee_address: p.payeeAddress.toLowerCase(),
      resource_url: p.resourceUrl,
      network: p.network,
      payer: p.payer,
      transaction: p.transaction.toLowerCase(),
    }),
    result: wire.signX402ReceiptResult.transform((r) => ({
      payload: {
        version: r.payload.version,
        network: r.payload.network,
        resourceUrl: r.payload.resource_url,
        payer: r.payload.payer,
        issuedAt: r.payload.issued_at,
        transaction: r.payload.transaction,
      },
      signature: r.signature as Hex,
    })),
  },
  configure_policy: {
    toWire: (p: ConfigurePolicyParams): wire.WirePolicy => signerPolicyToWire(p),
    result: wire.configurePolicyResult.transform(policyFromWire),
  },
  public_identity: {
    toWire: (p: PublicIdentityParams) => ({ key_ref: p.keyRef }),
    result: wire.publicIdentityResult.transform((r) => ({
      ...keyInfo(r),
      namespace: r.namespace,
      batchId: r.batch_id,
      envId: r.env_id,
      chainId: r.chain_id,
    })),
  },
  prove_identity: {
    toWire: (p: ProveIdentityParams) => ({
      key_ref: p.keyRef,
      verifier_nonce: p.verifierNonce.toLowerCase(),
    }),
    result: wire.proveIdentityResult.transform((r) => ({
      ...keyInfo(r),
      signature: r.signature as Hex,
      envId: r.env_id,
      chainId: r.chain_id,
    })),
  },
  sign_transfer: { toWire: txToWire, result: txResult },
  sign_faucet: { toWire: txToWire, result: txResult },
  sign_x402_authorization: {
    toWire: (p: SignX402AuthorizationParams) => ({
      key_ref: p.keyRef,
      from: p.from.toLowerCase(),
      to: p.to,
      value_units: p.valueUnits.toString(),
      valid_after: p.validAfter.toString(),
      valid_before: p.validBefore.toString(),
      nonce: p.nonce.toLowerCase(),
    }),
    result: wire.signX402AuthorizationResult.transform((r) => ({
      signature: r.signature as Hex,
      authorization: {
        from: r.authorization.from as Address,
        to: r.authorization.to as Address,
        value: BigInt(r.authorization.value),
        validAfter: BigInt(r.authorization.valid_after),
        validBefore: BigInt(r.authorization.valid_before),
        nonce: r.authorization.nonce as Hex,
      },
      countedOn: r.counted_on ?? null,
    })),
  },
  capability_counter: {
    toWire: (p: CapabilityCounterParams) => ({
      authority: p.authority.toLowerCase(),
      scope: p.scope,
      op: p.op,
    }),
    result: wire.capabilityCounterResult.transform((r) => ({ nextCounter: r.next_counter })),
  },
  sign_settlement: {
    toWire: (p: SignSettlementParams): wire.WireParams<"sign_settlement"> => ({
      key_ref: p.keyRef,
      chain_id: p.chainId,
      authorization: {
        from: p.authorization.from.toLowerCase(),
        to: p.authorization.to.toLowerCase(),
        value: p.authorization.value.toString(),
        valid_after: p.authorization.validAfter.toString(),
        valid_before: p.authorization.validBefore.toString(),
        nonce: p.authorization.nonce.toLowerCase(),
      },
      signature: p.signature.toLowerCase(),
      nonce: p.nonce.toString(),
      max_fee_per_gas: p.maxFeePerGas.toString(),
      max_priority_fee_per_gas: p.maxPriorityFeePerGas.toString(),
      gas_limit: p.gasLimit.toString(),
    }),
    result: txResult,
  },
  sign_filler: {
    toWire: (p: SignFillerParams): wire.WireParams<"sign_filler"> => ({
      key_ref: p.keyRef,
      from: p.from.toLowerCase(),
      chain_id: p.chainId,
      nonce: p.nonce.toString(),
      max_fee_per_gas: p.maxFeePerGas.toString(),
      max_priority_fee_per_gas: p.maxPriorityFeePerGas.toString(),
    }),
    result: txResult,
  },
  get_policy: {
    toWire: (_: Record<string, never>) => ({}),
    result: wire.getPolicyResult.transform(
      (r): GetPolicyResult => ({
        envId: r.env_id,
        chainId: r.chain_id,
        policyVersion: r.policy_version,
        policy: r.policy === null ? null : policyFromWire(r.policy),
        treasury:
          r.treasury === null
            ? null
            : {
                faucetKeyRef: r.treasury.faucet_key_ref,
                faucetAddress: r.treasury.faucet_address as Address,
                budgetUnits: BigInt(r.treasury.budget_units),
                spentUnits: BigInt(r.treasury.spent_units),
                terms: treasuryTerms(r.treasury),
              },
        settler:
          r.settler === null
            ? null
            : {
                settlerKeyRef: r.settler.settler_key_ref,
                settlerAddress: r.settler.settler_address as Address,
                feeSpentTodayUnits: BigInt(r.settler.fee_spent_today_units),
              },
        payee: r.payee
          ? { payeeKeyRef: r.payee.payee_key_ref, payeeAddress: r.payee.payee_address as Address }
          : null,
        nodeFrozen: r.node_frozen,
        nodeFreezeEpoch: r.node_freeze_epoch ?? 0,
        operatorKeys: r.operator_keys.map((key) => ({
          keyId: key.key_id,
          publicKey: key.public_key as Hex,
          label: key.label,
        })),
        revokedOperatorKeys: (r.revoked_operator_keys ?? []).map((revoked) => ({
          keyId: revoked.key_id,
          publicKey: revoked.public_key as Hex,
          revokedAt: new Date(revoked.revoked_at_ms),
        })),
        operatorPasskeys: (r.operator_passkeys ?? []).map((passkey) => ({
          keyId: passkey.key_id,
          operator: passkey.operator,
          credentialId: passkey.credential_id,
          publicKey: passkey.public_key as Hex,
          rpId: passkey.rp_id,
          origin: passkey.origin,
          label: passkey.label,
        })),
      }),
    ),
  },
  enroll_operator_key: {
    toWire: (p: EnrollOperatorKeyParams) => ({
      key_id: p.keyId,
      public_key: p.publicKey.toLowerCase(),
      ...(p.label === undefined ? {} : { label: p.label }),
    }),
    result: wire.enrollOperatorKeyResult.transform((r) => ({
      keyId: r.key_id,
      publicKey: r.public_key as Hex,
    })),
  },
  enroll_operator_passkey: {
    toWire: (p: EnrollOperatorPasskeyParams) => ({
      key_id: p.keyId,
      operator: p.operator,
      credential_id: p.credentialId,
      public_key: p.publicKey.toLowerCase(),
      rp_id: p.rpId,
      origin: p.origin,
      ...(p.label === undefined ? {} : { label: p.label }),
    }),
    result: wire.enrollOperatorPasskeyResult.transform((r) => ({
      keyId: r.key_id,
      credentialId: r.credential_id,
      publicKey: r.public_key as Hex,
    })),
  },
  revoke_operator_key: {
    toWire: (p: RevokeOperatorKeyParams) => ({ key_id: p.keyId }),
    result: wire.revokeOperatorKeyResult.transform((r) => ({
      keyId: r.key_id,
      publicKey: r.public_key as Hex,
      revokedAt: new Date(r.revoked_at_ms),
    })),
  },
  revoke_operator_passkey: {
    toWire: (p: RevokeOperatorPasskeyParams) => ({ key_id: p.keyId, credential_id: p.credentialId }),
    result: wire.revokeOperatorPasskeyResult.transform((r) => ({
      keyId: r.key_id,
      credentialId: r.credential_id,
      operator: r.operator,
      revokedAt: new Date(r.revoked_at_ms),
    })),
  },
  set_agent_policy: {
    toWire: (p: SetAgentPolicyParams) => ({
      key_ref: p.keyRef,
      policy: p.policy,
      ...(p.operator === undefined ? {} : { operator: operatorApprovalToWire(p.operator) }),
    }),
    result: wire.setAgentPolicyResult
      .extend({ policy: policyDocument })
      .transform((r) => ({ keyRef: r.key_ref, policy: r.policy, version: r.version })),
  },
  set_node_frozen: {
    toWire: (p: SetNodeFrozenParams) => ({
      frozen: p.frozen,
      ...(p.freezeEpoch === undefined ? {} : { freeze_epoch: p.freezeEpoch }),
      ...(p.operator === undefined ? {} : { operator: operatorApprovalToWire(p.operator) }),
    }),
    result: wire.setNodeFrozenResult,
  },
  approve_held: {
    toWire: (p: ApproveHeldParams) => ({
      key_ref: p.keyRef,
      kind: p.kind,
      ref: p.ref.toLowerCase(),
      to: p.to.toLowerCase(),
      value_units: p.valueUnits.toString(),
      expires_at: p.expiresAt,
      operator: operatorApprovalToWire(p.operator),
    }),
    result: wire.approveHeldResult.transform((r) => ({ approval: r.approval as Hex })),
  },
  get_agent_policy: {
    toWire: (p: { keyRef: string }) => ({ key_ref: p.keyRef }),
    result: wire.getAgentPolicyResult.extend({ policy: policyDocument }).transform(
      (r): AgentPolicyStatus => ({
        keyRef: r.key_ref,
        policy: r.policy,
        version: r.version,
        usage: {
          day: r.usage.day,
          month: r.usage.month,
          transfers: {
            dayUnits: BigInt(r.usage.transfers.day_units),
            monthUnits: BigInt(r.usage.transfers.month_units),
            dayCount: r.usage.transfers.day_count,
          },
          x402: {
            dayUnits: BigInt(r.usage.x402.day_units),
            dayCount: r.usage.x402.day_count,
            payees: Object.fromEntries(
              Object.entries(r.usage.x402.payees).map(([payee, units]) => [payee, BigInt(units)]),
            ),
          },
        },
        nodeFrozen: r.node_frozen,
      }),
    ),
  },
} satisfies { [Op in EnclaveOp]: Codec<never, z.ZodType> };

export type OpCodecs = typeof OP_CODECS;
export type OpParams<Op extends EnclaveOp> = Parameters<OpCodecs[Op]["toWire"]>[0];
export type OpResult<Op extends EnclaveOp> = z.output<OpCodecs[Op]["result"]>;
