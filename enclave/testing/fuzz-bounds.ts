/**
 * What every answer the socket fuzz (../fuzz.int.test.ts) gets signed must respect: the enclave's
 * claims of docs/security.md and docs/enclave.md, read off what it signed with the ecosystem's
 * own decoders (viem, @x402/extensions) and counted across the run here, not by the enclave's code:
 * - a transaction is signed by the key named, on the sealed chain, as asked, never to the operator
 *   pool; a transfer within the per-transaction limit, and a key's day within its daily limit;
 * - the faucet pays only its payout, only to agent keys of this enclave, each at most once an hour;
 * - the settler pays gas only for the precompile's call of an authorization its `from` signed, of
 *   the sealed terms, valid by the margin, within its fee budget of the day;
 * - a filler only at a nonce this key signed at, once;
 * - an x402 authorization as asked, of the pair or under the ceiling, valid within the window;
 * - the payee signs offers of the sealed terms only, receipts of this enclave's settlements only;
 * - a backup exports exactly the batch asked for, sealed to the operator's recovery key, and
 *   verifies as the batch it holds;
 * - what needs an operator's approval succeeds only with one the operator signed for exactly that,
 *   each accepted once (its counter grows);
 * - no op of the policy or recovery tier succeeds under a capability the origin can mint;
 * - under the recovery tier's own: a restore brings back exactly a backup's batch, each key once
 *   and none this enclave held already, and the recovery key is held only as the loader seals it;
 * - under the policy tier's own: an operator key or passkey is a point of P-256, a key id names one
 *   key or passkey for good and a credential one key id, and no more are held than there is room for;
 *   a configure op seals what it answers and get_policy then reports, the policy as asked (its x402
 *   pair whole or absent, its version one more), the treasury's terms with a fresh budget, and the
 *   faucet, the settler and the payee each on a key of its own namespace; what they sealed is what
 *   every later answer is held to, and only the key a role names signs for it.
 * Slack of a few seconds covers the clocks of the fuzz and the enclave reading now apart.
 */
import { createHash } from "node:crypto";
import { verifyOfferSignatureEIP712, verifyReceiptSignatureEIP712 } from "@x402/extensions/offer-receipt";
import {
  getAddress,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  type TransactionSerializedEIP1559,
  verifyTypedData,
} from "viem";
import { openRecoveryCopy } from "../../ops/lib/reencrypt-envelope.ts";
import type { AgentPolicyDocument } from "../../shared/agent-policy.ts";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../shared/eip712.ts";
import { PRIVILEGED_OP_SCOPE, type PrivilegedOp } from "../../shared/enclave-protocol.ts";
import type { Hex } from "../../shared/hex.ts";
import {
  agentPolicySubject,
  heldApprovalSubject,
  nodeFreezeSubject,
  type OperatorApprovedOp,
} from "../../shared/operator-approval.ts";
import { MAX_OPERATOR_KEYS } from "../ops/operator.ts";
import type { AgentKey } from "./agent-policy.ts";
import type { Backup } from "./fuzz-recovery.ts";
import type { FuzzShapes } from "./fuzz-shapes.ts";
import type { FuzzWorld, Role, Settlement } from "./fuzz-world.ts";
import { asOffer, asReceipt } from "./offer-receipt-wire.ts";
import { onP256 } from "./p256-points.ts";

const SLACK_SECONDS = 5n;
type Params = Record<string, unknown>;
type Result = Record<string, unknown>;
type KnownKey = { address: string; namespace: string };

const lower = (value: unknown): string => String(value).toLowerCase();
const nowSeconds = (): bigint => BigInt(Math.floor(Date.now() / 1000));
const utcDay = (): string => new Date().toISOString().slice(0, 10);
const ceilUnits = (wei: bigint): bigint => (wei + WEI_PER_UNIT - 1n) / WEI_PER_UNIT;
const maxFeeWei = (tx: SignedTransaction): bigint => (tx.gas ?? 0n) * (tx.maxFeePerGas ?? 0n);
type SignedTransaction = ReturnType<typeof parseTransaction>;

/** The sealed policy's bounds, as numbers to compare with. */
type Limits = {
  perTxUnits: bigint;
  dailyUnits: bigint;
  settlerDailyFeeUnits: bigint;
  feeCeilingWei: bigint;
  marginSeconds: bigint;
  maxTimeoutSeconds: bigint;
  operatorPool: string;
  /** The x402 pair; null when the policy has none. */
  pair: { payTo: string; units: bigint } | null;
  /** The node's x402 ceiling; null when it has none. */
  ceilingUnits: bigint | null;
  /** The payees the ceiling allows; null: any. */
  ceilingPayees: Set<string> | null;
  /** The recipients transfers may pay; null: any. */
  allowlist: Set<string> | null;
};

const addressSet = (list: unknown): Set<string> | null =>
  Array.isArray(list) ? new Set(list.map(lower)) : null;

function limitsOf(policy: Params): Limits {
  return {
    perTxUnits: BigInt(policy.per_tx_limit_units as string),
    dailyUnits: BigInt(policy.daily_limit_units as string),
    settlerDailyFeeUnits: BigInt(policy.settler_daily_fee_units as string),
    feeCeilingWei: BigInt(policy.fee_ceiling_wei as string),
    marginSeconds: BigInt(policy.x402_validity_margin_seconds as number),
    maxTimeoutSeconds: BigInt(policy.x402_max_timeout_seconds as number),
    operatorPool: lower(policy.operator_pool),
    pair:
      policy.x402_amount_units == null
        ? null
        : { payTo: lower(policy.x402_pay_to), units: BigInt(policy.x402_amount_units as string) },
    ceilingUnits:
      policy.x402_max_per_payment_units == null ? null : BigInt(policy.x402_max_per_payment_units as string),
    ceilingPayees: addressSet(policy.x402_payees),
    allowlist: addressSet(policy.recipient_allowlist),
  };
}

/**
 * A policy as the enclave seals it, to compare with what it answers and reports: addresses in lower
 * case, a list a set (in order of first mention), an absent ceiling or payee list left out.
 */
function asSealed(policy: Params): string {
  const list = (value: unknown) => (Array.isArray(value) ? [...new Set(value.map(lower))] : value);
  const { x402_max_per_payment_units: ceiling, x402_payees: payees, ...terms } = policy;
  const sealed: Params = {
    ...terms,
    recipient_allowlist: list(terms.recipient_allowlist),
    x402_pay_to: terms.x402_pay_to == null ? null : lower(terms.x402_pay_to),
    operator_pool: lower(terms.operator_pool),
    ...(ceiling == null ? {} : { x402_max_per_payment_units: ceiling }),
    ...(payees == null ? {} : { x402_payees: list(payees) }),
  };
  return JSON.stringify(Object.fromEntries(Object.entries(sealed).sort(([a], [b]) => a.localeCompare(b))));
}

/** An x402 authorization's wire fields as the EIP-712 message they stand for. */
function authorizationMessage(wire: Record<string, string>) {
  return {
    from: getAddress(wire.from!),
    to: getAddress(wire.to!),
    value: BigInt(wire.value!),
    validAfter: BigInt(wire.valid_after!),
    validBefore: BigInt(wire.valid_before!),
    nonce: wire.nonce as Hex,
  };
}

/** True when `signature` is `address`'s of `message` under the precompile's domain. */
const signedBy = (address: string, message: ReturnType<typeof authorizationMessage>, signature: unknown) =>
  verifyTypedData({
    address: getAddress(address),
    domain: nativeTransferAuthDomain(),
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message,
    signature: signature as Hex,
  }).catch(() => false);

/** A batch's keys as one string, to compare with another's. */
const listed = (keys: { key_ref: string; address: string }[]) =>
  keys.map((key) => `${key.key_ref}/${lower(key.address)}`).join();

/** True when `result` names `backup`'s batch: its id, namespace and every key, in order. */
const isBatchOf = (result: Result, backup: Backup): boolean =>
  result.batch_id === backup.batch_id &&
  result.namespace === backup.namespace &&
  listed(result.keys as AgentKey[]) === listed(backup.keys);

/** The members of `key`'s set in `sets`, made empty on first use. */
function setOf<T>(sets: Map<string, Set<T>>, key: string): Set<T> {
  const set = sets.get(key) ?? new Set<T>();
  sets.set(key, set);
  return set;
}

/** The bounds of one world, with what the run signed so far. */
export class SignedBounds {
  private limits: Limits;
  private faucetTerms: FuzzWorld["faucet"];
  private policyVersion: number;
  /** The key each role names, as configured. */
  private readonly named: Record<Role, string>;
  private readonly keys = new Map<string, KnownKey>();
  private readonly agentAddresses = new Set<string>();
  /** Units each key committed on a UTC day: value plus maximum fee (the settler's: fees alone). */
  private readonly spent = new Map<string, bigint>();
  private readonly signedNonces = new Map<string, Set<bigint>>();
  private readonly filledNonces = new Map<string, Set<bigint>>();
  /** When the faucet last paid each recipient, in ms. */
  private readonly paidAt = new Map<string, number>();
  private faucetSpent = 0n;
  private readonly settlements = new Map<string, Settlement>();
  private readonly operatorCounters = new Map<string, number>();
  /** Each agent key's policy as the enclave holds it (what its last accepted change set). */
  private readonly agentPolicies = new Map<string, AgentPolicyDocument | null>();
  private nodeFrozen = false;
  /** +1 each time the node is frozen from not frozen: what an unfreeze's approval must name. */
  private freezeEpoch = 0;
  /** Keys each backup's batch brought back. */
  private readonly imported = new Map<string, number>();
  /** What each enrolled key id names (an operator key's public key, or a passkey's every field). */
  private readonly enrolled = new Map<string, string>();
  /** The key id each enrolled credential is under. */
  private readonly credentials = new Map<string, string>();
  /** Each revoked passkey's credential, or operator key's `key <public key>`, by key id: neither is enrolled again. */
  private readonly revoked = new Map<string, string>();

  /** `readPolicy` asks the enclave for get_policy's answer. */
  constructor(
    private readonly world: FuzzWorld,
    private readonly shapes: FuzzShapes,
    private readonly readPolicy: () => Promise<Result>,
  ) {
    this.limits = limitsOf(world.policy);
    this.faucetTerms = world.faucet;
    this.policyVersion = world.policyVersion;
    this.named = {
      faucet: world.treasury.key_ref,
      settler: world.settler.key_ref,
      payee: world.payee.key_ref,
    };
    for (const agent of [...world.agents, ...world.backup.keys])
      this.learnKey(agent.key_ref, agent.address, "agent-transfer");
    this.learnKey(world.treasury.key_ref, world.treasury.address, "faucet");
    this.learnKey(world.settler.key_ref, world.settler.address, "settler");
    this.learnKey(world.payee.key_ref, world.payee.address, "payee");
    for (const [role, key] of Object.entries(world.spares)) this.learnKey(key.key_ref, key.address, role);
    for (const [keyId, publicKey] of world.enrolledOperatorKeys) this.enrolled.set(keyId, `key ${publicKey}`);
    const settler = lower(world.settler.address);
    for (const settlement of world.settlements) {
      this.settlements.set(settlement.txHash, settlement);
      setOf(this.signedNonces, settler).add(BigInt(settlement.nonce));
      this.countDay(settler, ceilUnits(settlement.maxFeeWei));
    }
  }

  /**
   * What a successful answer of `op` to `params` broke, or null; `ownTier` when its capability was
   * minted by its own tier's authority, not by the admin tier's.
   */
  async broken(op: string, params: Params, result: Result, ownTier: boolean): Promise<string | null> {
    if (op in PRIVILEGED_OP_SCOPE && PRIVILEGED_OP_SCOPE[op as PrivilegedOp] !== "admin" && !ownTier)
      return `${op} succeeded under a capability of the admin tier`;
    switch (op) {
      case "generate_keys":
        for (const key of result.keys as { key_ref: string; address: string }[])
          this.learnKey(key.key_ref, key.address, String(result.namespace));
        return null;
      case "export_backup":
        return this.exported(params, result);
      case "verify_backup":
        return this.verifiedBackup(result);
      case "restore_backup":
        return this.restored(result);
      case "load_recovery_key":
        return this.recoveryKeyLoaded(params);
      case "enroll_operator_key":
        return this.enroll(op, params, result, `key ${String(params.public_key)}`);
      case "enroll_operator_passkey": {
        const { credential_id, public_key, rp_id, origin, operator } = params;
        const passkey = `passkey ${[credential_id, public_key, rp_id, origin, operator].map(String).join(" ")}`;
        const holder = this.credentials.get(String(credential_id)) ?? params.key_id;
        if (holder !== params.key_id) return `${op} enrolled a credential of key id ${holder} under another`;
        this.credentials.set(String(credential_id), String(params.key_id));
        return this.enroll(op, params, result, passkey);
      }
      case "revoke_operator_passkey":
        return this.revokedPasskey(params, result);
      case "revoke_operator_key":
        return this.revokedOperatorKey(params, result);
      case "configure_policy":
        return this.policyConfigured(params, result);
      case "configure_treasury":
        return this.treasuryConfigured(params, result);
      case "configure_settler":
      case "configure_payee":
        return this.roleConfigured(op === "configure_settler" ? "settler" : "payee", params, result);
      case "sign_transfer":
        return this.transfer(params, result);
      case "sign_faucet":
        return this.faucet(params, result);
      case "sign_filler":
        return this.filler(params, result);
      case "sign_settlement":
        return this.settlement(params, result);
      case "sign_x402_authorization":
        return this.x402Authorization(params, result);
      case "sign_x402_offer":
        return this.offer(result);
      case "sign_x402_receipt":
        return this.receipt(result);
      case "approve_held":
        return this.approved(params, "approve_held", () =>
          heldApprovalSubject(
            {
              instanceId: this.world.instanceId,
              keyRef: String(params.key_ref),
              kind: params.kind as "transfer" | "x402",
              ref: String(params.ref),
              to: String(params.to),
              valueUnits: BigInt(String(params.value_units)),
            },
            Number(params.expires_at),
          ),
        );
      case "set_node_frozen":
        return this.freeze(params);
      case "set_agent_policy": {
        const keyRef = String(params.key_ref);
        const problem =
          params.operator === undefined
            ? null
            : this.approved(
                params,
                "set_agent_policy",
                () => agentPolicySubject(keyRef, params.policy as never),
                agentPolicySubject(keyRef, this.agentPolicies.get(keyRef) ?? null),
              );
        this.agentPolicies.set(keyRef, result.policy as AgentPolicyDocument | null);
        return problem;
      }
      default:
        return null;
    }
  }

  private learnKey(keyRef: string, address: string, namespace: string): void {
    this.keys.set(keyRef, { address: lower(address), namespace });
    if (namespace === "agent-transfer") this.agentAddresses.add(lower(address));
  }

  /** Counts `units` against `signer`'s UTC day; the day's total. */
  private countDay(signer: string, units: bigint): bigint {
    const slot = `${signer}/${utcDay()}`;
    const total = (this.spent.get(slot) ?? 0n) + units;
    this.spent.set(slot, total);
    return total;
  }

  /**
   * The one envelope of the run holds the world's batch: a success vouches for exactly its keys.
   * (A changed byte of the recovery copy verifies: the enclave cannot open that copy, and says so;
   * the restore drill opens it.)
   */
  private verifiedBackup(result: Result): string | null {
    return isBatchOf(result, this.world.backup)
      ? null
      : "verify_backup vouched for another batch than the envelope's";
  }

  /**
   * An export holds exactly the keys asked for, as generated (address and namespace), and its
   * recovery copy opens with the operator's recovery key, as the offline tool opens it, to keys
   * that reproduce them.
   */
  private async exported(params: Params, result: Result): Promise<string | null> {
    const envelope = result.envelope as Uint8Array;
    if (result.batch_id !== params.batch_id) return "export_backup answered another batch than asked";
    if (result.sha256 !== `0x${createHash("sha256").update(envelope).digest("hex")}`)
      return "export_backup's sha256 is not the envelope's";
    const opened = await openRecoveryCopy({
      envelope,
      recoveryPrivateKey: this.world.recoveryEncryptionKey,
      expect: { envId: this.world.envId, chainId: CHAIN_ID, batchId: String(params.batch_id) },
    });
    if (!opened.ok)
      return `export_backup's recovery copy does not open as the operator's: ${opened.error.code}`;
    const { header } = opened.value;
    const asked = params.key_refs as string[];
    const exportedKeys = header.keys.map((key) => `${key.key_ref}/${lower(key.address)}`);
    const askedKeys = asked.map((ref) => `${ref}/${this.keys.get(ref)?.address}`);
    const namespaces = new Set(asked.map((ref) => this.keys.get(ref)?.namespace));
    if (
      exportedKeys.sort().join() !== askedKeys.sort().join() ||
      namespaces.size !== 1 ||
      !namespaces.has(header.namespace)
    )
      return "export_backup exported other keys than asked for";
    return null;
  }

  /**
   * The envelopes and packages of the run hold this enclave's batch or the donor's: a restore
   * brings back exactly one of them, none of this enclave's own keys again, the donor's once.
   */
  private restored(result: Result): string | null {
    const { backup, donor } = this.world;
    const batch = [backup, donor].find((known) => isBatchOf(result, known));
    if (!batch) return "restore_backup restored another batch than a backup's";
    const imported = (this.imported.get(batch.batch_id) ?? 0) + Number(result.imported);
    this.imported.set(batch.batch_id, imported);
    if (batch === backup && imported > 0) return "restore_backup imported again keys this enclave holds";
    if (imported > batch.keys.length) return "restore_backup imported a key of the donor's batch twice";
    for (const key of batch.keys) this.learnKey(key.key_ref, key.address, batch.namespace);
    return null;
  }

  /** Held only as the loader seals it: this enclave's recovery key, to a transport key it offered. */
  private recoveryKeyLoaded(params: Params): string | null {
    const box = this.world.recovery.keyBoxes.find(
      ({ params: sealed }) =>
        sealed.ct === params.ct &&
        sealed.enc === params.enc &&
        sealed.transport_public_key === params.transport_public_key,
    );
    return box?.genuine
      ? null
      : "load_recovery_key held a key other than this enclave's recovery key sealed to a transport key it offered";
  }

  /** An operator key or passkey enrolled as `names`: a point of P-256, its id naming it for good, room left. */
  private enroll(op: string, params: Params, result: Result, names: string): string | null {
    if (result.key_id !== params.key_id || result.public_key !== params.public_key)
      return `${op} answered another key than it was asked to enroll`;
    if (!onP256(String(params.public_key))) return `${op} enrolled a point that is not a P-256 key`;
    const id = String(params.key_id);
    if (this.revoked.has(id)) return `${op} enrolled key id ${id} of a revoked passkey or key again`;
    const before = this.enrolled.get(id);
    if (before !== undefined && before !== names) return `${op} enrolled key id ${id} again as another key`;
    this.enrolled.set(id, names);
    return this.enrolled.size > MAX_OPERATOR_KEYS
      ? `${op} enrolled more keys than the enclave has room for`
      : null;
  }

  /** A passkey revoked: the one enrolled under that id with that credential (or revoked so before). */
  private revokedPasskey(params: Params, result: Result): string | null {
    const id = String(params.key_id);
    const credential = String(params.credential_id);
    if (result.key_id !== id || result.credential_id !== credential)
      return "revoke_operator_passkey answered another passkey than it was asked to revoke";
    const before = this.revoked.get(id);
    if (before !== undefined)
      return before === credential
        ? null
        : `revoke_operator_passkey revoked key id ${id} under another credential`;
    if (this.credentials.get(credential) !== id)
      return `revoke_operator_passkey revoked key id ${id}, under which that credential is not enrolled`;
    this.revoked.set(id, credential);
    // A revoked passkey leaves the room it took.
    this.enrolled.delete(id);
    return null;
  }

  /**
   * An operator key revoked: the one enrolled under that id (or revoked so before; the world's own
   * key, enrolled before the model, is known by its answer).
   */
  private revokedOperatorKey(params: Params, result: Result): string | null {
    const id = String(params.key_id);
    if (result.key_id !== id) return "revoke_operator_key answered another key than it was asked to revoke";
    const names = `key ${String(result.public_key)}`;
    const before = this.revoked.get(id);
    if (before !== undefined)
      return before === names ? null : `revoke_operator_key revoked key id ${id} as another key`;
    const enrolled = this.enrolled.get(id);
    if (enrolled !== undefined && enrolled !== names)
      return `revoke_operator_key revoked key id ${id}, under which that key is not enrolled`;
    this.revoked.set(id, names);
    // A revoked key leaves the room it took.
    this.enrolled.delete(id);
    return null;
  }

  /** The signed transaction, decoded, and what is wrong with it before the op's own rules. */
  private async transaction(
    params: Params,
    result: Result,
    namespace: string,
  ): Promise<{ problem: string } | { tx: SignedTransaction; signer: string }> {
    const raw = result.raw_transaction as TransactionSerializedEIP1559;
    const tx = parseTransaction(raw);
    const signer = lower(await recoverTransactionAddress({ serializedTransaction: raw }));
    const key = this.keys.get(String(params.key_ref));
    if (key?.namespace !== namespace) return { problem: `signed with a key not of ${namespace}` };
    if ((namespace === "faucet" || namespace === "settler") && params.key_ref !== this.named[namespace])
      return { problem: `signed with a ${namespace} key the ${namespace} does not name` };
    if (signer !== key.address) return { problem: `signed by ${signer}, not the key named (${key.address})` };
    if (tx.chainId !== CHAIN_ID) return { problem: `signed for chain ${tx.chainId}` };
    if (lower(tx.to) === this.limits.operatorPool) return { problem: "sent to the operator pool" };
    if (keccak256(raw) !== result.tx_hash) return { problem: "tx_hash is not the transaction's hash" };
    if (maxFeeWei(tx) > this.limits.feeCeilingWei) return { problem: "fee above the ceiling" };
    setOf(this.signedNonces, signer).add(BigInt(tx.nonce ?? 0));
    return { tx, signer };
  }

  private async transfer(params: Params, result: Result): Promise<string | null> {
    const signed = await this.transaction(params, result, "agent-transfer");
    if ("problem" in signed) return `sign_transfer ${signed.problem}`;
    const { tx, signer } = signed;
    const value = (tx.value ?? 0n) / WEI_PER_UNIT;
    if (
      lower(tx.to) !== lower(params.to) ||
      value !== BigInt(String(params.value_units)) ||
      tx.gas !== BigInt(String(params.gas_limit)) ||
      BigInt(tx.nonce ?? 0) !== BigInt(String(params.nonce))
    )
      return "sign_transfer signed other fields than asked";
    if (this.limits.allowlist && !this.limits.allowlist.has(lower(tx.to)))
      return "sign_transfer paid a recipient outside the allowlist";
    const cost = value + ceilUnits(maxFeeWei(tx));
    if (cost > this.limits.perTxUnits) return `sign_transfer over the per-transaction limit (${cost})`;
    if (this.countDay(signer, cost) > this.limits.dailyUnits)
      return "sign_transfer over the key's daily limit";
    return null;
  }

  private async faucet(params: Params, result: Result): Promise<string | null> {
    const signed = await this.transaction(params, result, "faucet");
    if ("problem" in signed) return `sign_faucet ${signed.problem}`;
    const { tx } = signed;
    const faucet = this.faucetTerms;
    if ((tx.value ?? 0n) !== faucet.payoutUnits * WEI_PER_UNIT)
      return "sign_faucet paid other than the payout";
    const recipient = lower(tx.to);
    if (!this.agentAddresses.has(recipient)) return "sign_faucet paid an address that is no agent key here";
    const now = Date.now();
    const last = this.paidAt.get(recipient);
    if (last !== undefined && now - last < faucet.cooldownMs - Number(SLACK_SECONDS) * 1000)
      return "sign_faucet paid one recipient twice within its cooldown";
    this.paidAt.set(recipient, now);
    this.faucetSpent += faucet.payoutUnits + ceilUnits(maxFeeWei(tx));
    return this.faucetSpent > faucet.budgetUnits ? "sign_faucet over the treasury's budget" : null;
  }

  private async filler(params: Params, result: Result): Promise<string | null> {
    const key = this.keys.get(String(params.key_ref));
    const before = new Set(this.signedNonces.get(key?.address ?? ""));
    const signed = await this.transaction(params, result, key?.namespace ?? "none");
    if ("problem" in signed) return `sign_filler ${signed.problem}`;
    const { tx, signer } = signed;
    if (lower(tx.to) !== signer || (tx.value ?? 0n) !== 0n || tx.gas !== 21_000n)
      return "sign_filler signed something other than nothing to itself";
    const nonce = BigInt(tx.nonce ?? 0);
    if (!before.has(nonce)) return `sign_filler at nonce ${nonce}, where this run signed nothing of the key`;
    const filled = setOf(this.filledNonces, signer);
    if (filled.has(nonce)) return `sign_filler twice at nonce ${nonce}`;
    filled.add(nonce);
    const limit = { "agent-transfer": this.limits.dailyUnits, settler: this.limits.settlerDailyFeeUnits }[
      key!.namespace
    ];
    if (limit !== undefined && this.countDay(signer, ceilUnits(maxFeeWei(tx))) > limit)
      return "sign_filler over the key's limit of the day";
    return null;
  }

  /** The node's x402 rule: the sealed pair, or up to the ceiling to a payee it allows. */
  private ofTheTerms(message: ReturnType<typeof authorizationMessage>): boolean {
    const { operatorPool, pair, ceilingUnits, ceilingPayees } = this.limits;
    if (lower(message.from) === operatorPool) return false;
    if (pair && lower(message.to) === pair.payTo && message.value === pair.units) return true;
    return (
      ceilingUnits !== null &&
      message.value <= ceilingUnits &&
      (ceilingPayees === null || ceilingPayees.has(lower(message.to)))
    );
  }

  /** True when `validBefore` leaves the sealed margin and is within the sealed maximum, from now. */
  private inWindow(validBefore: bigint): boolean {
    const now = nowSeconds();
    return (
      validBefore >= now + this.limits.marginSeconds - SLACK_SECONDS &&
      validBefore <= now + this.limits.maxTimeoutSeconds + SLACK_SECONDS
    );
  }

  private async settlement(params: Params, result: Result): Promise<string | null> {
    const signed = await this.transaction(params, result, "settler");
    if ("problem" in signed) return `sign_settlement ${signed.problem}`;
    const { tx, signer } = signed;
    if (lower(tx.to) !== NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase() || (tx.value ?? 0n) !== 0n)
      return "sign_settlement signed other than the precompile's call, value 0";
    const message = authorizationMessage(params.authorization as Record<string, string>);
    if (!(await signedBy(message.from, message, params.signature)))
      return "sign_settlement paid gas for an authorization its `from` did not sign";
    if (!this.ofTheTerms(message)) return "sign_settlement paid gas for a payment outside the sealed terms";
    const validNow = message.validAfter <= nowSeconds() - this.limits.marginSeconds + SLACK_SECONDS;
    if (!validNow || !this.inWindow(message.validBefore))
      return "sign_settlement paid gas for an authorization outside the sealed window";
    this.settlements.set(result.tx_hash as string, {
      txHash: result.tx_hash as Hex,
      payer: message.from,
      payee: lower(message.to),
      nonce: String(tx.nonce ?? 0),
      maxFeeWei: maxFeeWei(tx),
    });
    return this.countDay(signer, ceilUnits(maxFeeWei(tx))) > this.limits.settlerDailyFeeUnits
      ? "sign_settlement over the settler's fee budget of the day"
      : null;
  }

  private async x402Authorization(params: Params, result: Result): Promise<string | null> {
    const key = this.keys.get(String(params.key_ref));
    if (key?.namespace !== "agent-transfer") return "sign_x402_authorization with a key that is no agent's";
    const signed = result.authorization as Record<string, string>;
    for (const name of ["from", "to", "nonce"] as const)
      if (lower(signed[name]) !== lower(params[name]))
        return `sign_x402_authorization signed another ${name}`;
    for (const name of ["valid_after", "valid_before"] as const)
      if (signed[name] !== params[name]) return `sign_x402_authorization signed another ${name}`;
    if (signed.value !== params.value_units) return "sign_x402_authorization signed another value";
    const message = authorizationMessage(signed);
    if (!(await signedBy(key.address, message, result.signature)))
      return "sign_x402_authorization's signature is not the key's";
    if (!this.ofTheTerms(message)) return "sign_x402_authorization signed a payment outside the node's terms";
    if (!this.inWindow(message.validBefore))
      return "sign_x402_authorization signed outside the sealed window";
    return null;
  }

  private async offer(result: Result): Promise<string | null> {
    const payload = result.payload as Record<string, unknown>;
    const { signer } = await verifyOfferSignatureEIP712(asOffer(result));
    const payee = this.payeeAddress();
    if (lower(signer) !== payee) return "sign_x402_offer signed by another key than the payee";
    const { pair } = this.limits;
    const sealed =
      payload.scheme === "exact" &&
      payload.network === `eip155:${CHAIN_ID}` &&
      lower(payload.asset) === NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase() &&
      lower(payload.pay_to) === payee &&
      lower(payload.pay_to) === pair?.payTo &&
      payload.amount === pair.units.toString();
    if (!sealed) return "sign_x402_offer signed other terms than the sealed ones";
    if (BigInt(payload.valid_until as number) > nowSeconds() + this.limits.maxTimeoutSeconds + SLACK_SECONDS)
      return "sign_x402_offer valid for longer than the sealed maximum";
    return null;
  }

  private async receipt(result: Result): Promise<string | null> {
    const payload = result.payload as Record<string, unknown>;
    const { signer } = await verifyReceiptSignatureEIP712(asReceipt(result));
    const payee = this.payeeAddress();
    if (lower(signer) !== payee) return "sign_x402_receipt signed by another key than the payee";
    const settlement = this.settlements.get(String(payload.transaction));
    if (!settlement) return "sign_x402_receipt for a transaction the settler did not sign here";
    if (settlement.payee !== payee || lower(settlement.payer) !== lower(payload.payer))
      return "sign_x402_receipt names another payer or payee than the settlement's";
    if (payload.network !== `eip155:${CHAIN_ID}`) return "sign_x402_receipt names another network";
    return null;
  }

  /** The address of the key the payee names. */
  private payeeAddress(): string {
    return this.keys.get(this.named.payee)!.address;
  }

  /** The policy answered as asked, sealed as answered, its version one more; later answers are held to it. */
  private async policyConfigured(params: Params, result: Result): Promise<string | null> {
    if ((params.x402_amount_units == null) !== (params.x402_pay_to == null))
      return "configure_policy sealed half an x402 pair";
    if (asSealed(result) !== asSealed(params)) return "configure_policy answered another policy than asked";
    const sealed = await this.readPolicy();
    if (asSealed(sealed.policy as Params) !== asSealed(result))
      return "configure_policy sealed another policy than it answered";
    if (sealed.policy_version !== this.policyVersion + 1)
      return `configure_policy took the version from ${this.policyVersion} to ${String(sealed.policy_version)}`;
    this.policyVersion += 1;
    this.limits = limitsOf(result);
    return null;
  }

  /**
   * The treasury on a faucet key (the one asked for, or the one named before), its terms as asked
   * and a fresh budget, sealed as answered. Its recipients' cooldowns carry over.
   */
  private async treasuryConfigured(params: Params, result: Result): Promise<string | null> {
    const problem = this.onKeyOf(
      "faucet",
      params.faucet_key_ref,
      result.faucet_key_ref,
      result.faucet_address,
    );
    if (problem) return `configure_treasury ${problem}`;
    const terms = ["budget_units", "payout_units", "cooldown_ms", "daily_limit_units"] as const;
    if (terms.some((term) => result[term] !== params[term]))
      return "configure_treasury answered other terms than asked";
    const treasury = (await this.readPolicy()).treasury as Result | null;
    const expected: Result = { ...result, spent_units: "0" };
    if (!treasury || Object.keys(expected).some((name) => treasury[name] !== expected[name]))
      return `configure_treasury sealed other than it answered, with a fresh budget: ${JSON.stringify(treasury)}`;
    this.faucetTerms = {
      payoutUnits: BigInt(params.payout_units as string),
      cooldownMs: params.cooldown_ms as number,
      dailyUnits: BigInt(params.daily_limit_units as string),
      budgetUnits: BigInt(params.budget_units as string),
    };
    this.faucetSpent = 0n;
    return null;
  }

  /** The settler or the payee on a key of its namespace (the one asked for, or the one named before), sealed. */
  private async roleConfigured(
    role: "settler" | "payee",
    params: Params,
    result: Result,
  ): Promise<string | null> {
    const op = `configure_${role}`;
    const problem = this.onKeyOf(
      role,
      params[`${role}_key_ref`],
      result[`${role}_key_ref`],
      result[`${role}_address`],
    );
    if (problem) return `${op} ${problem}`;
    const sealed = (await this.readPolicy())[role] as Result | null;
    if (sealed?.[`${role}_key_ref`] !== result[`${role}_key_ref`])
      return `${op} sealed another key than it answered`;
    return null;
  }

  /**
   * What is wrong with `role` named on `answered` (at `address`) when asked for `asked`: a key of the
   * role's namespace, the one asked for, or without one the one named before. Names it if nothing.
   */
  private onKeyOf(role: Role, asked: unknown, answered: unknown, address: unknown): string | null {
    const key = this.keys.get(String(answered));
    if (key?.namespace !== role) return `named a key not of the ${role} namespace`;
    if (key.address !== lower(address)) return "answered another address than the key's";
    if (answered !== (asked ?? this.named[role])) return "named another key than asked, or than it named";
    this.named[role] = String(answered);
    return null;
  }

  private freeze(params: Params): string | null {
    const unfreezing = this.nodeFrozen && params.frozen === false;
    if (unfreezing && params.operator === undefined) return "set_node_frozen unfroze without an operator";
    if (params.operator !== undefined && params.freeze_epoch !== this.freezeEpoch)
      return "set_node_frozen took an operator's approval signed over another freeze than the one holding";
    const problem =
      params.operator === undefined
        ? null
        : this.approved(params, "set_node_frozen", () =>
            nodeFreezeSubject(params.frozen as boolean, this.freezeEpoch),
          );
    if (!problem) {
      if (params.frozen === true && !this.nodeFrozen) this.freezeEpoch += 1;
      this.nodeFrozen = params.frozen as boolean;
      this.shapes.freezeEpoch = this.freezeEpoch;
    }
    return problem;
  }

  /**
   * Null when `params.operator` is an approval the operator signed of `op` over exactly this (a
   * policy change's over the policy the enclave held), used once.
   */
  private approved(
    params: Params,
    op: OperatorApprovedOp,
    subject: () => Hex,
    policyBefore?: Hex,
  ): string | null {
    const approval = params.operator as { key_id?: string; counter?: number } | undefined;
    const approved = approval && typeof approval === "object" ? this.shapes.genuine.get(approval) : undefined;
    if (!approved || approved.op !== op || approved.subject !== subject())
      return `${op} succeeded without the operator's approval of exactly this`;
    if (approved.policyBefore !== policyBefore)
      return `${op} took an operator's approval signed over another policy than the one it held`;
    const last = this.operatorCounters.get(String(approval!.key_id)) ?? 0;
    if ((approval!.counter ?? 0) <= last) return `${op} accepted an operator's approval twice`;
    this.operatorCounters.set(String(approval!.key_id), approval!.counter!);
    return null;
  }
}
