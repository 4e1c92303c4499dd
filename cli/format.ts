import { formatUnits } from "viem";
import {
  type ActionView,
  type AgentEvent,
  type BalanceResponse,
  isActionEvent,
  type NetworkResponse,
  type PaymentSettlement,
  type PolicyCheckResult,
  type PolicyResponse,
  type ProofProgress,
  type RegisterResponse,
  type TokenRotation,
} from "../client/index.ts";

/** The human form of a command's result; --json prints the result itself. */
export function formatHuman(command: string, result: unknown): string {
  switch (command) {
    case "network": {
      const network = result as NetworkResponse;
      const on = Object.entries(network.features)
        .map(([name, enabled]) => `${name} ${enabled ? "on" : "off"}`)
        .join(", ");
      return [
        `chain ${network.chain.chain_id} (${network.chain.caip2}), latest block ${network.chain.latest_block ?? "unknown"}`,
        `agent ${network.agent.agent_id}`,
        `wallet ${network.agent.assigned_wallet}`,
        `capabilities ${network.agent.capabilities.join(", ")}`,
        `features: ${on}`,
        `rpc methods: ${network.rpc.allowed_methods.join(", ")}`,
      ].join("\n");
    }
    case "balance": {
      const balance = result as BalanceResponse;
      return `${formatUnits(BigInt(balance.balance), balance.decimals)} ${balance.symbol} (${balance.balance} units) in ${balance.address} at block ${balance.block_number}`;
    }
    case "faucet":
    case "transfer":
    case "action": {
      const action = result as ActionView & { idempotency_key?: string };
      return [
        `action ${action.action_id}: ${action.kind} ${action.status}`,
        ...(action.amount ? [`amount ${formatUnits(BigInt(action.amount), 6)} USDC to ${action.to}`] : []),
        ...(action.tx_hash ? [`tx ${action.tx_hash}`] : []),
        ...(action.error_code ? [`error ${action.error_code}`] : []),
        ...(action.status === "held"
          ? [
              `held by rule ${action.rule} until ${action.expires_at}: nothing signed; an operator approves or rejects it`,
            ]
          : []),
        ...(action.idempotency_key ? [`idempotency key ${action.idempotency_key}`] : []),
      ].join("\n");
    }
    case "policy": {
      const answer = result as PolicyResponse;
      return [
        answer.policy === null
          ? "no spending policy: the node's limits alone apply"
          : `spending policy version ${answer.version}: ${JSON.stringify(answer.policy)}`,
        ...(answer.node_frozen ? ["the node is frozen: every money request is refused"] : []),
        ...answer.budgets.map(
          (budget) =>
            `${budget.rule}: ${budget.used} used of ${budget.limit}, ${budget.remaining} remaining, resets ${budget.resets_at}`,
        ),
      ].join("\n");
    }
    case "policy-check": {
      const check = result as PolicyCheckResult;
      return check.decision === "allow"
        ? "allow"
        : `${check.decision} by rule ${check.rule}${check.remaining === null ? "" : ` (remaining ${check.remaining})`}`;
    }
    case "register": {
      const registered = result as RegisterResponse;
      return [
        `token ${registered.token}`,
        "  (shown once: store it now, e.g. export AGENT_TOKEN=...; it cannot be recovered)",
        `agent ${registered.agent_id}`,
        `wallet ${registered.assigned_wallet}`,
        `capabilities ${registered.capabilities.join(", ")}`,
      ].join("\n");
    }
    case "rotate-token": {
      const rotated = result as TokenRotation;
      return [
        `token ${rotated.token}`,
        "  (shown once: store it now, e.g. export AGENT_TOKEN=...; the old token no longer works)",
        `agent ${rotated.agent_id}`,
        `wallet ${rotated.assigned_wallet}`,
        `capabilities ${rotated.capabilities.join(", ")}`,
      ].join("\n");
    }
    case "pay": {
      const paid = result as { status: number; settlement: PaymentSettlement | null; body: unknown };
      const body = typeof paid.body === "string" ? paid.body : JSON.stringify(paid.body, null, 2);
      const settled = paid.settlement;
      return [
        settled?.success
          ? `${paid.status}: paid in transaction ${settled.transaction} on ${settled.network}`
          : `${paid.status}${settled ? `: the payment was not settled (${settled.errorReason ?? "no reason given"})` : ""}`,
        body,
      ].join("\n");
    }
    default:
      return JSON.stringify(result, null, 2);
  }
}

/**
 * One event of `watch` as one line: when, the type, the action, its kind and status, the amount in
 * USDC (from the integer units, never through a float) and the recipient, and an error's code.
 */
export function formatEventLine(event: AgentEvent): string {
  // `action.*` and `x402.authorization.signed`, whose data is the x402 action too, so its line
  // reads as its `action.signed` does (docs/events.md#from-the-cli).
  if (!isActionEvent(event)) return `${event.occurred_at} ${event.type} ${JSON.stringify(event.data)}`;
  const action = event.data;
  return [
    event.occurred_at,
    event.type,
    action.action_id,
    action.kind,
    action.status,
    ...(action.amount ? [`${formatUnits(BigInt(action.amount), 6)} USDC`] : []),
    ...(action.to ? [`to ${action.to}`] : []),
    ...(action.error_code ? [`error ${action.error_code}`] : []),
  ].join(" ");
}

/**
 * The one stderr line of a registration whose proof of work takes more than a moment: what it is
 * and how long it takes on average at the rate seen so far (2^bits attempts expected).
 */
export function proofProgressLine(progress: ProofProgress): string {
  const perMs = progress.attempts / Math.max(progress.elapsedMs, 1);
  const expectedSeconds = Math.max(1, Math.round(2 ** progress.bits / perMs / 1000));
  return `agent-wallet: registration asks for a proof of work (${progress.bits} bits); solving it, about ${expectedSeconds} s on average on this machine…`;
}
