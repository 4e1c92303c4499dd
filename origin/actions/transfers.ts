/**
 * POST /agent/v1/transfers (docs/architecture.md#moving-money-post-agentv1transfers-and-faucet): from the caller's assigned wallet to `to`, within
 * the per-transaction and UTC-daily limits (value plus the maximum fee, as the enclave counts),
 * the optional recipient allowlist, the wallet's balance and the funding gate (of the sender's
 * wallet, and of the recipient's when it is one of the service's). The enclave checks the same
 * limits again under its sealed policy; these checks exist to give the clear error.
 */
import type { Handler } from "hono";
import {
  evaluateTransfer,
  NO_AGENT_POLICY,
  NO_USAGE,
  type PolicyDecision,
  type TransferRequest,
} from "../../shared/agent-policy.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import {
  AGENT_POLICY_REFUSAL_DETAILS,
  KEY_REFUSAL_DETAILS,
  TRANSACTION_REFUSAL_DETAILS,
  TRANSFER_REFUSAL_DETAILS,
} from "../../shared/enclave-protocol.ts";
import { transferRequestSchema } from "../../shared/gateway-schemas.ts";
import { findActionByKey, requestHash } from "../agent-actions/repository.ts";
import { AppError } from "../errors.ts";
import { evaluateWalletGate, type GateRefusal } from "../funding/gate.ts";
import type { AppEnv, AuthenticatedAgent } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";
import { policyDenied } from "../policy/refusal.ts";
import { KEY_BINDING_MISMATCH, keyUnavailable } from "../signer/key-binding.ts";
import { refusalDetailAmong } from "../signer/refusal-detail.ts";
import type { SignerFailure } from "../signer/types.ts";
import type { MoneyServices } from "./money-services.ts";
import type { CheckFacts, Held, MoneyOperation, Refusal, Stop } from "./operation.ts";
import { receivingGate } from "./receiving-gate.ts";
import { runMoneyAction } from "./run-action.ts";

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";
const PRECOMPILE_ADDRESS = NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase();
/** The addresses the EVM reserves for its precompiles: 19 zero bytes, then one more byte. */
const LOW_ADDRESS = /^0x0{38}[0-9a-f]{2}$/;

/**
 * Why no transfer may go to `to` (lowercase), whatever the sender's policy says: the transfer's 400
 * validation_failed, and the policy check's `deny` by the node's rule `node.recipient` (the check
 * answered `allow` for a transfer the node refuses; docs/api.md, "Transfers").
 */
export function recipientRefusal(to: string, operatorPool: string): string | undefined {
  // The zero address has no key: whatever is sent there is gone for good, and a zero `to` is far
  // more often an unset variable than a wish to burn.
  if (to === ZERO_ADDRESS) return "to must not be the zero address: nothing sent there can be spent";
  // The EVM's precompiles live at the lowest addresses (0x…01 ecrecover to 0x…0a on Cancun, more
  // with each fork): each takes value as any account does, the transfer is mined with status 0x1,
  // and no key can ever spend what it holds. The whole range below 0x…0100 is refused, so a fork
  // that adds one there does not open a hole.
  if (LOW_ADDRESS.test(to)) {
    return "to must not be a precompile's address (0x…0001 to 0x…00ff): nothing sent there can be spent";
  }
  // The NativeTransferAuth precompile takes calls of its functions only: a plain transfer to it is
  // mined and reverts, and the agent pays the fee for nothing.
  if (to === PRECOMPILE_ADDRESS) {
    return `to must not be the NativeTransferAuth precompile (${PRECOMPILE_ADDRESS}): a transfer to it always reverts, its fee paid for nothing`;
  }
  if (to === operatorPool) return "to must not be the operator pool (the bridge operator)";
  return undefined;
}

export function transfersHandler(services: MoneyServices): Handler<AppEnv> {
  const { recipientAllowlist } = services.config.transfers;
  const allowlist = recipientAllowlist ? new Set<string>(recipientAllowlist) : null;
  return async (c) => {
    const body = await parseJsonBody(c, transferRequestSchema);
    const agent = c.get("agent");
    const to = body.to.toLowerCase();
    const amount = BigInt(body.amount);
    const claim = {
      agentId: agent.agentId,
      kind: "transfer" as const,
      idempotencyKey: body.idempotency_key,
      requestHash: requestHash("transfer", { to, amount: body.amount }),
      amountUnits: amount,
      toAddress: to,
    };
    // Refusals that depend on nothing but the request, answered before anything is written: only
    // to a key never used. The allowlist is the node's configuration, and these rules are the
    // release's, both changing origin by origin as they restart: a repeat of a key recorded while
    // `to` was taken is that request, and answers what it came to (a transfer that may have moved
    // the money, or a conflict), never a refusal that reads as nothing paid.
    const refused = recipientRefusal(to, services.operatorPool);
    const offList = allowlist !== null && !allowlist.has(to);
    if ((refused !== undefined || offList) && !(await findActionByKey(services.db, claim))) {
      if (refused !== undefined) throw new AppError("validation_failed", refused);
      throw new AppError("recipient_not_allowed", "this node only transfers to its allowlisted recipients");
    }
    return runMoneyAction(c, services, claim, (actionId) =>
      transferOperation(services, { actionId, agent, to, amount }),
    );
  };
}

/**
 * One transfer as the executor runs it: the agent's wallet pays, under the node's per-transaction
 * and daily limits, the wallet's balance and the funding gate of both ends (the checks read the
 * facts the executor gathered under its locks).
 */
export function transferOperation(
  services: Pick<MoneyServices, "config">,
  params: {
    actionId: string;
    agent: Pick<AuthenticatedAgent, "agentId" | "assignedWallet" | "keyRef">;
    to: string;
    amount: bigint;
    /** An operator approved this held transfer (holds.ts). */
    approved?: boolean;
  },
): MoneyOperation {
  const { perTxLimitUnits, dailyLimitUnits, holdSeconds } = services.config.transfers;
  const { actionId, agent, to, amount } = params;
  const approved = params.approved ?? false;
  const wallet = agent.assignedWallet.toLowerCase();
  return {
    actionId,
    agentId: agent.agentId,
    purpose: "transfer",
    sender: { address: wallet, keyRef: agent.keyRef },
    to,
    valueUnits: amount,
    approved,
    signerOp: "signTransfer",
    signerRefusal: (failure) =>
      approved && refusalDetailAmong(failure, SIGN_TRANSFER_DETAILS) === "policy_held"
        ? heldAgain(failure, holdSeconds)
        : signerRefusal(failure),
    check: (facts) => {
      if (facts.costUnits > perTxLimitUnits) {
        return limitExceeded(
          "per_transaction",
          perTxLimitUnits,
          perTxLimitUnits,
          perTxLimitUnits === 0n
            ? "transfers are not allowed on this node: its per-transaction limit is 0 (AGENT_TRANSFER_PER_TX_LIMIT)"
            : `amount plus the maximum fee (${facts.costUnits} units) is over the per-transaction limit of ${perTxLimitUnits} units`,
        );
      }
      const spent = facts.transferSpentUnits;
      if (spent + facts.costUnits > dailyLimitUnits) {
        const remaining = dailyLimitUnits > spent ? dailyLimitUnits - spent : 0n;
        return limitExceeded(
          "daily",
          dailyLimitUnits,
          remaining,
          dailyLimitUnits === 0n
            ? "transfers are not allowed on this node: its daily limit is 0 (AGENT_TRANSFER_DAILY_LIMIT)"
            : `amount plus the maximum fee (${facts.costUnits} units) is over what remains of today's limit (${remaining} of ${dailyLimitUnits} units; the day is UTC)`,
        );
      }
      // The agent's policy: a deny now, a hold only once nothing else refuses (deny wins).
      const policy = policyDecision(facts, { to, costUnits: facts.costUnits }, approved);
      if (policy?.decision === "deny") return policyDenied(policy);
      const available = facts.sender.balanceWei - facts.inFlightWei;
      if (available < facts.costWei) return insufficientFunds(facts.costWei, facts.costUnits, available);
      const gate = evaluateWalletGate(facts.senderGate, available - facts.costWei);
      // An approved transfer whose agent was disabled after the worker read it (approved.ts) waits
      // for the agent, as one disabled before it was read does: an enable undoes a disable, and
      // ending it here would lose the operator's approval with it. Nothing is signed meanwhile.
      if (gate?.reason === "identity_disabled" && approved) return { notNow: gateClosed(gate) };
      if (gate) return gateClosed(gate);
      // A transfer to the sender itself brings the wallet nothing but its own value back: its gate
      // as the sender, just above, is the whole of it.
      const recipient = to === wallet ? null : recipientGate(facts, amount);
      if (recipient) return recipient;
      if (policy?.decision === "hold") {
        return { held: { rule: policy.rule, holdSeconds } };
      }
      return null;
    },
  };
}

/**
 * The funding gate of the recipient when it is another of the service's agent wallets: money moves
 * into it only as the faucet may pay it (docs/api.md, "The funding gate"). An outside address is
 * not the service's to gate. The message names the recipient, so the agent does not look for the
 * cause in its own wallet; `reason` is the gate's, as for the sender's.
 */
function recipientGate(facts: CheckFacts, amount: bigint): Stop | null {
  if (!facts.recipientGate) return null;
  const gate = receivingGate(facts.recipientGate, facts.recipientBalanceWei, amount * WEI_PER_UNIT);
  if (!gate || "notNow" in gate) return gate;
  return gateClosed({
    reason: gate.reason,
    message: `the recipient is another wallet of this service, and it may not receive funds now: ${gate.message}`,
  });
}

function gateClosed(gate: GateRefusal): Refusal {
  return { code: "funding_gate_closed", message: gate.message, fields: { reason: gate.reason } };
}

/** The transfer against the agent's policy and the node's freeze; null when neither bounds it. */
function policyDecision(
  facts: CheckFacts,
  request: TransferRequest,
  approved: boolean,
): Exclude<PolicyDecision, { decision: "allow" }> | null {
  if (!facts.policy && !facts.nodeFrozen) return null;
  const usage = facts.policy?.usage ?? NO_USAGE.transfers;
  const decision = evaluateTransfer(
    facts.policy?.policy ?? NO_AGENT_POLICY,
    { ...NO_USAGE, transfers: usage },
    request,
    { nodeFrozen: facts.nodeFrozen, approved },
  );
  return decision.decision === "allow" ? null : decision;
}

/**
 * The wallet cannot pay: the figures in the units the request's `amount` uses (docs/api.md,
 * "insufficient_funds"), what is needed rounded up as the limits count it and what is available
 * rounded down, so a refusal never reads as "needs 5, has 5". The exact wei figures stay beside
 * them: a balance that paid fees is rarely a whole number of units, and earlier clients read them.
 */
function insufficientFunds(neededWei: bigint, neededUnits: bigint, availableWei: bigint): Refusal {
  const availableUnits = availableWei > 0n ? availableWei / WEI_PER_UNIT : 0n;
  return {
    code: "insufficient_funds",
    message: `the wallet cannot pay the amount plus the maximum fee: it needs ${neededUnits} units and has ${availableUnits} available (pending transfers included)`,
    fields: {
      needed_units: neededUnits.toString(),
      available_units: availableUnits.toString(),
      needed_wei: neededWei.toString(),
      available_wei: availableWei.toString(),
    },
  };
}

function limitExceeded(
  limit: "per_transaction" | "daily",
  limitUnits: bigint,
  remainingUnits: bigint,
  message: string,
): Refusal {
  return {
    code: "limit_exceeded",
    message,
    fields: { limit, limit_units: limitUnits.toString(), remaining_units: remainingUnits.toString() },
  };
}

/** What sign_transfer is refused with: the key, the transaction's bounds, the transfer limits. */
const SIGN_TRANSFER_DETAILS = [
  ...KEY_REFUSAL_DETAILS,
  ...TRANSACTION_REFUSAL_DETAILS,
  ...TRANSFER_REFUSAL_DETAILS,
  ...AGENT_POLICY_REFUSAL_DETAILS,
];

/**
 * An approved transfer the enclave holds: it has no approval of it, though the row says an operator
 * approved it. The approval was used up by a signature that never came back to be stored (an
 * origin killed between the two, an answer lost on the way), or lapsed; either way nothing was
 * signed that anyone holds. Held again, for the hold's length from now, so an operator can approve
 * it anew; ending it `policy_denied` would tell the agent no operator had approved it. One whose
 * hold has ended meanwhile ends `expired` instead (batch-store.ts, the `held` rows).
 */
function heldAgain(failure: SignerFailure, holdSeconds: number): Held {
  return { held: { rule: failure.rule ?? "approval", holdSeconds } };
}

/**
 * The enclave refused under its sealed policy: the same limits, so the same kind of answer. A
 * switch over the refusal's detail (never its text), exhaustive over sign_transfer's, so a new
 * detail of its groups must be placed.
 */
function signerRefusal(failure: SignerFailure): Refusal | null {
  const sealed = `the signer's sealed policy refused this transfer (${failure.reason})`;
  const detail = refusalDetailAmong(failure, SIGN_TRANSFER_DETAILS);
  switch (detail) {
    case "per_transaction":
    case "daily":
      return { code: "limit_exceeded", message: sealed, fields: { limit: detail } };
    case "recipient":
      return { code: "recipient_not_allowed", message: sealed };
    case "key_binding":
      return KEY_BINDING_MISMATCH;
    // Bounds this node's own checks keep it within (chain, gas, fees: a node configured unlike the
    // sealed policy, a fee spike over the sealed ceiling): nothing about this request, nothing
    // signed; the action stays requested and a retry with its key runs it again.
    case "chain":
    case "gas_limit":
    case "fee_ceiling":
      return null;
    // The agent's policy as the enclave holds it. The gateway answered the same rules first, so a
    // refusal here means the two disagree (a change sealed whose row a crash lost, or a bypassed
    // check): final, and never signed. A hold the gateway did not make is refused too: the
    // enclave saw no approval of this transfer.
    case "policy_denied":
    case "policy_held":
      return policyDenied({ rule: failure.rule ?? "policy", remaining: "0" });
    case undefined:
      return failure.code === "key_purpose_mismatch" ? keyUnavailable("wallet") : null;
  }
}
