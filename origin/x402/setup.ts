/**
 * What the x402 surfaces need, built once at start by the composition root (compose.ts):
 * the quote from configuration, the settler from the enclave's sealed policy, and the settler
 * engine. Refuses to start x402 when the sealed x402 terms differ from the configuration or no
 * settler key exists, naming each difference.
 */
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Config } from "../config.ts";
import type { Db } from "../db/client.ts";
import type { Outbox } from "../outbox/index.ts";
import type { GetPolicyResult } from "../signer/types.ts";
import { HOLD_BEYOND_RECEIPT_MS } from "./payee/earlier-presentation.ts";
import { createPayerFactsReader } from "./payee/payer-facts.ts";
import { demoRequirements, type PaymentRequirements } from "./payee/requirements.ts";
import { createSettler, type Settler } from "./payee/settle.ts";
import { chainAuthorizationUsed } from "./payee/used-elsewhere.ts";
import type { X402Ceiling } from "./payer/authorize-policy.ts";

export type X402Runtime = {
  requirements: PaymentRequirements;
  /**
   * The enclave's sealed x402 ceiling, as read at start (null: none, the pair only): what the
   * payer side may authorize beside the pair, for agents with a policy.
   */
  ceiling: X402Ceiling | null;
  operatorPool: string;
  settler: Settler;
  settlerAddress: string;
  /** The enclave's payee key's address (null: none), which signs offers and receipts when it is payTo. */
  payeeAddress: string | null;
  /** Aborts when the origin stops (the outbox's): a presentation's wait on another's settlement ends. */
  stopping: AbortSignal;
  /** What a presentation held by another waits beyond the receipt wait (earlier-presentation.ts holdMs). */
  holdBeyondReceiptMs: number;
};

/** Every way this node's x402 configuration differs from the sealed policy, one line each. */
export function x402PolicyDifferences(config: Config, sealed: GetPolicyResult): string[] {
  if (!config.features.x402) return [];
  const differences: string[] = [];
  const policy = sealed.policy;
  if (!policy) return differences; // startup/money-setup.ts reports the missing policy
  const amount = config.x402.amountUnits?.toString() ?? "unset";
  const sealedAmount = policy.x402AmountUnits?.toString() ?? "unset";
  if (amount !== sealedAmount)
    differences.push(`AGENT_X402_AMOUNT is ${amount} but the enclave's sealed policy says ${sealedAmount}`);
  const payTo = config.x402.payTo ?? "unset";
  const sealedPayTo = policy.x402PayTo?.toLowerCase() ?? "unset";
  if (payTo !== sealedPayTo)
    differences.push(`AGENT_X402_PAY_TO is ${payTo} but the enclave's sealed policy says ${sealedPayTo}`);
  // The gateway refuses a longer validity itself (payer/authorize-requirement.ts); the enclave refuses
  // one over its sealed bound. Equal bounds give the agent the gateway's clear 422 every time.
  const timeout = config.x402.maxTimeoutSeconds;
  if (timeout !== policy.x402MaxTimeoutSeconds)
    differences.push(
      `AGENT_X402_MAX_TIMEOUT_SECONDS is ${timeout} but the enclave's sealed policy says ${policy.x402MaxTimeoutSeconds}`,
    );
  // The enclave refuses to settle, or to sign, an authorization inside its sealed margin, and to sign
  // more than its sealed count per key and day; the gateway's own checks use these settings, so
  // the agent gets the gateway's clear answer first. A lower daily count at the gateway only
  // answers sooner (an operator tightening one node, or a test); a higher one would leave the
  // agent with the enclave's refusal.
  const margin = config.x402.validityMarginSeconds;
  if (margin !== policy.x402ValidityMarginSeconds)
    differences.push(
      `AGENT_X402_VALIDITY_MARGIN_SECONDS is ${margin} but the enclave's sealed policy says ${policy.x402ValidityMarginSeconds}`,
    );
  const daily = config.x402.dailyLimit;
  if (daily > policy.x402DailyLimit)
    differences.push(
      `AGENT_X402_DAILY_LIMIT is ${daily}, above the enclave's sealed policy's ${policy.x402DailyLimit}`,
    );
  if (!sealed.settler) {
    differences.push(
      "AGENT_X402_ENABLED is true but the enclave has no x402 settler key: `npm run enclave-policy -- settler --policy-key FILE`",
    );
  }
  return differences;
}

/** Builds the runtime; undefined when x402 is off (or the money runtime could not be built). */
export function buildX402Runtime(params: {
  config: Config;
  sealed: GetPolicyResult;
  /** The money runtime's parts the settler shares (compose.ts builds them). */
  money: { operatorPool: string; outbox: Outbox } | undefined;
  db: Db;
  rpc: JsonRpcUpstream | undefined;
  /** HOLD_BEYOND_RECEIPT_MS by default (tests shorten it). */
  holdBeyondReceiptMs?: number;
}): X402Runtime | undefined {
  const { config, sealed, money, rpc } = params;
  const { amountUnits, payTo } = config.x402;
  if (!config.features.x402 || !money || !rpc || !sealed.settler || amountUnits === undefined || !payTo) {
    return undefined;
  }
  const settlerAddress = sealed.settler.settlerAddress.toLowerCase();
  const holdBeyondReceiptMs = params.holdBeyondReceiptMs ?? HOLD_BEYOND_RECEIPT_MS;
  return {
    requirements: demoRequirements({ amountUnits, payTo, maxTimeoutSeconds: config.x402.maxTimeoutSeconds }),
    ceiling: sealedCeiling(sealed.policy),
    operatorPool: money.operatorPool,
    settlerAddress,
    payeeAddress: sealed.payee?.payeeAddress.toLowerCase() ?? null,
    stopping: money.outbox.stopping,
    holdBeyondReceiptMs,
    settler: createSettler({
      db: params.db,
      settler: { address: settlerAddress, keyRef: sealed.settler.settlerKeyRef },
      // The wall clock: the window is checked against the chain's block times, which follow it.
      now: () => new Date(),
      validityMarginSeconds: config.x402.validityMarginSeconds,
      receiptTimeoutMs: config.x402.receiptTimeoutMs,
      holdBeyondReceiptMs,
      // The node's one outbox, shared with money: settlements and transfers leave in signing order.
      outbox: money.outbox,
      stopping: money.outbox.stopping,
      chainAuthorizationUsed: chainAuthorizationUsed(createPayerFactsReader(rpc)),
    }),
  };
}

/**
 * The sealed ceiling (docs/x402.md#many-sellers-the-node-ceiling-and-the-agents-policy): the most
 * one payment may be and, optionally, to whom; absent from a policy sealed before it existed.
 */
export function sealedCeiling(
  policy: { x402MaxPerPaymentUnits?: bigint | null; x402Payees?: readonly string[] | null } | null,
): X402Ceiling | null {
  const max = policy?.x402MaxPerPaymentUnits ?? null;
  if (max === null) return null;
  const payees = policy?.x402Payees ?? null;
  return {
    maxPerPaymentUnits: max,
    payees: payees === null ? null : new Set(payees.map((payee) => payee.toLowerCase())),
  };
}
