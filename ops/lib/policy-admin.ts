/**
 * Applying the enclave's signing policy, treasury and settler with the policy authority key
 * (docs/enclave.md, "Keys and where production keeps them"). Shared by the operator CLI
 * (ops/enclave-policy.ts) and the local stack (dev/local-policy.ts), so both take the same path: read the
 * sealed policy, merge the changes, mint a policy-tier capability with the next counter, apply, read it back.
 */
import { createCapabilityMinter } from "../../origin/signer/capability-minter.ts";
import { signerPolicyToWire } from "../../origin/signer/op-codecs.ts";
import type {
  FaucetTerms,
  GetPolicyResult,
  SignerClient,
  SignerFailure,
  SignerPolicy,
} from "../../origin/signer/types.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { enclaveUnreachable } from "./enclave-unreachable.ts";

export type PolicyChanges = Partial<SignerPolicy>;
export type FaucetTermsChanges = Partial<FaucetTerms>;

export type PolicyAdminFailure =
  /** The request cannot be made as given: a usage error in the CLI. */
  | { code: "usage"; message: string }
  /** The enclave refused it: refused in the CLI. */
  | { code: "refused"; failure: EnclaveAnswer }
  /**
   * The request never had the enclave's answer (no socket, a timeout, a dropped connection): an
   * error in the CLI. A change whose answer was lost may have been applied; `show` tells.
   */
  | { code: "unreachable"; failure: EnclaveAnswer };

/** The signer's failure as the CLI shows it: its code and its text for people. */
type EnclaveAnswer = Pick<SignerFailure, "code" | "reason">;

/** The sealed state before and after the change, or why there was none. */
export type PolicyAdminResult = Result<
  { before: GetPolicyResult; after: GetPolicyResult },
  PolicyAdminFailure
>;

/** Every field a first policy must name, with the CLI flag that sets it. */
export const POLICY_FIELD_FLAGS: { [Field in keyof SignerPolicy]-?: string } = {
  perTxLimitUnits: "--per-tx",
  dailyLimitUnits: "--daily",
  feeCeilingWei: "--fee-ceiling",
  recipientAllowlist: "--allowlist",
  x402AmountUnits: "--x402-amount",
  x402PayTo: "--x402-pay-to",
  x402MaxTimeoutSeconds: "--max-validity",
  x402ValidityMarginSeconds: "--x402-margin",
  x402DailyLimit: "--x402-daily",
  settlerDailyFeeUnits: "--settler-daily",
  operatorPool: "--operator-pool",
  x402MaxPerPaymentUnits: "--x402-max-per-payment",
  x402Payees: "--x402-payees",
};

/** Fields a first policy may leave out: the node's x402 ceiling, none unless named. */
const OPTIONAL_POLICY_FIELDS: ReadonlySet<keyof SignerPolicy> = new Set([
  "x402MaxPerPaymentUnits",
  "x402Payees",
]);

/** Every payout term a treasury without sealed terms must name, with the CLI flag that sets it. */
export const FAUCET_TERM_FLAGS: { [Field in keyof FaucetTerms]-?: string } = {
  payoutUnits: "--payout",
  cooldownMs: "--cooldown-ms",
  dailyLimitUnits: "--payout-daily",
};

type MergeResult = Result<SignerPolicy, PolicyAdminFailure>;

/**
 * The sealed policy with `changes` laid over it. Without a sealed policy every field must be given
 * (x402PayTo may be left out when x402AmountUnits is null). x402 amount and payTo are set together.
 */
export function mergePolicy(current: SignerPolicy | null, changes: PolicyChanges): MergeResult {
  const given = Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined));
  const merged: PolicyChanges = { ...current, ...given };
  if (merged.x402AmountUnits === null && changes.x402PayTo === undefined) merged.x402PayTo = null;
  const missing = (Object.keys(POLICY_FIELD_FLAGS) as Array<keyof SignerPolicy>).filter(
    (field) => merged[field] === undefined && !OPTIONAL_POLICY_FIELDS.has(field),
  );
  if (missing.length > 0) {
    const flags = missing.map((field) => POLICY_FIELD_FLAGS[field]).join(", ");
    return usage(`no policy is sealed yet, so the first apply needs every field; missing ${flags}`);
  }
  const policy = merged as SignerPolicy;
  if ((policy.x402AmountUnits === null) !== (policy.x402PayTo === null)) {
    return usage("--x402-amount and --x402-pay-to are set together (--x402-amount none clears both)");
  }
  return ok(policy);
}

/** Applies `changes` over the sealed policy under a capability minted from the policy key. */
export async function applyPolicy(params: {
  client: SignerClient;
  policySecret: Uint8Array;
  changes: PolicyChanges;
}): Promise<PolicyAdminResult> {
  const before = await params.client.getPolicy();
  if (!before.ok) return refused(before.error);
  const merged = mergePolicy(before.value.policy, params.changes);
  if (!merged.ok) return merged;
  const applied = await params.client.configurePolicy(merged.value, minter(params, before.value));
  if (!applied.ok) return refused(applied.error);
  return readAfter(params.client, before.value);
}

/**
 * The sealed payout terms with `changes` laid over them. Without sealed terms (no treasury yet,
 * or one sealed before the enclave kept them) every term must be given.
 */
export function mergeFaucetTerms(
  current: FaucetTerms | null,
  changes: FaucetTermsChanges,
): Result<FaucetTerms, PolicyAdminFailure> {
  const given = Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined));
  const merged: FaucetTermsChanges = { ...current, ...given };
  const missing = (Object.keys(FAUCET_TERM_FLAGS) as Array<keyof FaucetTerms>).filter(
    (field) => merged[field] === undefined,
  );
  if (missing.length > 0) {
    const flags = missing.map((field) => FAUCET_TERM_FLAGS[field]).join(", ");
    return usage(`no payout terms are sealed yet, so treasury needs every one; missing ${flags}`);
  }
  const terms = merged as FaucetTerms;
  // The enclave would refuse every payout as over the recipient's day, and the node would tell
  // each agent to come back at a midnight that changes nothing.
  if (terms.dailyLimitUnits < terms.payoutUnits) {
    return usage(
      `--payout-daily ${terms.dailyLimitUnits} is below --payout ${terms.payoutUnits}: no payout fits a recipient's day, so the faucet would pay nothing`,
    );
  }
  return ok(terms);
}

/**
 * configure_treasury: a fresh budget (spent restarts at zero), the faucet key kept unless named,
 * the payout terms kept unless named.
 */
export async function applyTreasury(params: {
  client: SignerClient;
  policySecret: Uint8Array;
  budgetUnits: bigint;
  faucetKeyRef?: string;
  terms?: FaucetTermsChanges;
}): Promise<PolicyAdminResult> {
  const before = await params.client.getPolicy();
  if (!before.ok) return refused(before.error);
  const merged = mergeFaucetTerms(before.value.treasury?.terms ?? null, params.terms ?? {});
  if (!merged.ok) return merged;
  const applied = await params.client.configureTreasury(
    {
      budgetUnits: params.budgetUnits,
      ...merged.value,
      ...(params.faucetKeyRef === undefined ? {} : { faucetKeyRef: params.faucetKeyRef }),
    },
    minter(params, before.value),
  );
  if (!applied.ok) return refused(applied.error);
  return readAfter(params.client, before.value);
}

/**
 * configure_settler: makes the x402 settler key once (a repeat keeps it), or points the settler at
 * a key of the `settler` namespace (a restored one, after a recovery).
 */
export async function applySettler(params: {
  client: SignerClient;
  policySecret: Uint8Array;
  settlerKeyRef?: string;
}): Promise<PolicyAdminResult> {
  const before = await params.client.getPolicy();
  if (!before.ok) return refused(before.error);
  const applied = await params.client.configureSettler(
    params.settlerKeyRef === undefined ? {} : { settlerKeyRef: params.settlerKeyRef },
    minter(params, before.value),
  );
  if (!applied.ok) return refused(applied.error);
  return readAfter(params.client, before.value);
}

/**
 * configure_payee: keeps the x402 payee key (made at init), or points the payee at a key of the
 * `payee` namespace (a restored one, after a recovery, so the demo's payTo keeps its address).
 */
export async function applyPayee(params: {
  client: SignerClient;
  policySecret: Uint8Array;
  payeeKeyRef?: string;
}): Promise<PolicyAdminResult> {
  const before = await params.client.getPolicy();
  if (!before.ok) return refused(before.error);
  const applied = await params.client.configurePayee(
    params.payeeKeyRef === undefined ? {} : { payeeKeyRef: params.payeeKeyRef },
    minter(params, before.value),
  );
  if (!applied.ok) return refused(applied.error);
  return readAfter(params.client, before.value);
}

/** True when the sealed policy is exactly `policy` (addresses compared without case). */
export function samePolicy(sealed: SignerPolicy | null, policy: SignerPolicy): boolean {
  if (!sealed) return false;
  const canonical = (value: SignerPolicy): string => JSON.stringify(signerPolicyToWire(value)).toLowerCase();
  return canonical(sealed) === canonical(policy);
}

function minter(params: { client: SignerClient; policySecret: Uint8Array }, sealed: GetPolicyResult) {
  // Env and chain come from the enclave itself: the operator needs nothing but the key and socket.
  return createCapabilityMinter({
    authority: params.policySecret,
    envId: sealed.envId,
    chainId: sealed.chainId,
    client: params.client,
    requestId: () => `enclave-policy-${crypto.randomUUID()}`,
  });
}

async function readAfter(client: SignerClient, before: GetPolicyResult): Promise<PolicyAdminResult> {
  const after = await client.getPolicy();
  if (!after.ok) return refused(after.error);
  return ok({ before, after: after.value });
}

function usage(message: string): { ok: false; error: PolicyAdminFailure } {
  return err({ code: "usage", message });
}

function refused(failure: SignerFailure): { ok: false; error: PolicyAdminFailure } {
  const code = enclaveUnreachable(failure) ? "unreachable" : "refused";
  return err({ code, failure: { code: failure.code, reason: failure.reason } });
}
