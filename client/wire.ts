/**
 * The answers of the gateway as the client returns them (docs/api.md), written out as plain types
 * so that the client package's declarations need no schema library. The origin validates with the
 * zod schemas of shared/gateway-schemas.ts; wire.test.ts fails the typecheck when the two differ.
 */
import type { ActionStatus } from "../shared/action-status.ts";
import type { Capability } from "../shared/constants.ts";

export type { ActionStatus, Capability };

/**
 * A faucet payout, a transfer, an x402 authorization or a filler the service signed from the
 * wallet, as POST and GET /actions/{id} answer it.
 */
export type ActionView = {
  action_id: string;
  kind: "faucet" | "transfer" | "x402" | "filler";
  status: ActionStatus;
  tx_hash: string | null;
  /** 6-decimal units. */
  amount: string | null;
  to: string | null;
  /** What the mined transaction cost its sender in fees, in wei; null until mined. */
  fee_wei: string | null;
  /** Why a failed action failed (an error code of the gateway), else null. */
  error_code: string | null;
  /**
   * While `submitted`: the node's words for its last broadcast, when that was not accepted. Still
   * in flight: only the chain ends it.
   */
  last_broadcast_error: string | null;
  /** Ended `failed` because a filler from the wallet took its nonce: that filler's action. */
  replaced_by: string | null;
  rule: string | null;
  expires_at: string | null;
  created_at: string;
  updated_at: string;
};

/**
 * The type of an event whose data is one of the agent's actions: a status it entered, `abandoned`,
 * or an x402 authorization signed (written beside its `action.signed`, the same data).
 */
export type ActionEventType = `action.${ActionStatus}` | "action.abandoned" | "x402.authorization.signed";

/**
 * An event of GET {base}/agent/v1/events whose data is one of the agent's actions
 * (docs/events.md#the-event-log): the action as GET /actions/{id} answered it at that moment.
 */
export type ActionEvent = {
  /** The event log's id, a decimal string. */
  id: string;
  type: ActionEventType;
  occurred_at: string;
  data: ActionView;
};

/** An event of any other type (a settlement, the identity, …), its data as the service sent it. */
export type OtherAgentEvent = {
  id: string;
  type: string;
  occurred_at: string;
  data: Record<string, unknown>;
};

/** One event of the agent's stream, as the stream's `data:` carries it. */
export type AgentEvent = ActionEvent | OtherAgentEvent;

/** GET {base}/agent/v1/network: the contract an agent adapts to. */
export type NetworkResponse = {
  api_version: "v1";
  chain: {
    chain_id: 77;
    caip2: "eip155:77";
    native_token: { symbol: "USDC"; decimals: 6 };
    /** A decimal string; null while the chain does not answer. */
    latest_block: string | null;
  };
  agent: { agent_id: string; assigned_wallet: string; capabilities: Capability[]; spending_policy: boolean };
  rpc: {
    allowed_methods: string[];
    max_batch: number;
    max_batch_bytes: number;
    max_response_bytes: number;
  };
  limits: {
    rpc_in_flight: { per_agent: number; per_node: number };
    failed_auth_per_ip: { limit: number; window_seconds: number };
    requests_per_agent: { limit: number; window_seconds: number };
    transfer: { per_tx_units: string; daily_units: string; recipient_allowlist: string[] | null };
    faucet: { payout_units: string; cooldown_ms: number; daily_units: string };
    x402: {
      amount_units: string | null;
      pay_to: string | null;
      max_timeout_seconds: number;
      /** Authorizations the agent may have signed per UTC day (429 x402_daily_limit past it). */
      daily_limit: number;
    };
  };
  features: { faucet: boolean; transfers: boolean; x402: boolean; registration: boolean };
};

/** GET {base}/agent/v1/balance: decimal strings, in 6-decimal units and in 18-decimal wei. */
export type BalanceResponse = {
  address: string;
  balance: string;
  decimals: 6;
  symbol: "USDC";
  balance_wei: string;
  block_number: string;
};

/** POST {base}/agent/v1/register: 201, the token shown once. */
export type RegisterResponse = {
  token: string;
  agent_id: string;
  assigned_wallet: string;
  capabilities: Capability[];
  chain_id: 77;
};

/** POST {base}/agent/v1/token/rotate: the new token, shown once, for the same identity. */
export type TokenRotation = {
  token: string;
  agent_id: string;
  assigned_wallet: string;
  capabilities: Capability[];
};

/**
 * The agent's spending policy (docs/agents.md#your-spending-policy): every field optional, amounts
 * in 6-decimal units as decimal strings, counts as numbers. Narrower than the node's limits, which
 * stay the ceiling.
 */
export type AgentPolicyDocument = {
  transfers?: {
    per_tx_units?: string;
    daily_units?: string;
    monthly_units?: string;
    daily_count?: number;
    allow?: string[];
    deny?: string[];
  };
  x402?: {
    payees?: Array<{
      pay_to: string;
      resource_prefix?: string;
      per_payment_units: string;
      daily_units?: string;
    }>;
    daily_units?: string;
    daily_count?: number;
    unknown_payee?: "deny" | "hold";
  };
  approval_above_units?: string;
  frozen?: boolean;
};

/** One budget of the policy: its limit, what its window used, what remains, when it resets. */
export type PolicyBudget = {
  /** The document's path of the figure (`transfers.daily_units`, `x402.payees[0x…].daily_units`). */
  rule: string;
  /** Units, or a count for the `*_count` rules. */
  limit: string;
  used: string;
  remaining: string;
  /** The next UTC midnight, or the first of the next UTC month. */
  resets_at: string;
};

/** GET and PATCH {base}/agent/v1/policy: the policy as sealed in the enclave, and its budgets. */
export type PolicyResponse = {
  /** null: the node's limits only. */
  policy: AgentPolicyDocument | null;
  /** +1 on each change; null without a policy. */
  version: number | null;
  /** An operator froze every agent of the node: every money request is refused. */
  node_frozen: boolean;
  budgets: PolicyBudget[];
};

/** POST {base}/agent/v1/policy/check: what the real request would meet now; nothing reserved. */
export type PolicyCheckResult = {
  decision: "allow" | "hold" | "deny";
  /** The rule that decided a hold or a deny; null for allow. */
  rule: string | null;
  /** What remains under that rule (units or a count; "0" for a deny that is not a budget); null otherwise. */
  remaining: string | null;
};
