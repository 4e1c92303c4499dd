/**
 * The shapes of the gateway's successful answers, as far as the client and the agent CLI read them:
 * the fields they use, of the types they use them as. The origin answers through the zod schemas of
 * shared/gateway-schemas.ts; this package carries no schema library, so these are written out, and
 * stay loose on what nothing here reads. A 2xx body that fails its shape is not the gateway's (a
 * proxy's page in JSON, another service at the base URL): callJson turns it into UnexpectedAnswer,
 * where reading it on ended in a TypeError in the caller, or printed `action undefined` and exit 0.
 */
import type {
  ActionView,
  BalanceResponse,
  NetworkResponse,
  PolicyCheckResult,
  PolicyResponse,
  RegisterResponse,
  TokenRotation,
} from "./wire.ts";

/** Whether a parsed JSON body has the shape of `T`; `description` names `T` in an error. */
export type AnswerShape<T> = { description: string; matches(value: unknown): value is T };

type Check = (value: unknown) => boolean;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const string: Check = (value) => typeof value === "string";
const number: Check = (value) => typeof value === "number";
const boolean: Check = (value) => typeof value === "boolean";
/** A decimal string of whole units or wei, as money is on the wire (BigInt reads it). */
const units: Check = (value) => typeof value === "string" && /^\d+$/.test(value);
const record: Check = isRecord;
const nullable =
  (check: Check): Check =>
  (value) =>
    value === null || check(value);
/** Absent, null or `check`: a field only some answers carry, read only when present. */
const optional =
  (check: Check): Check =>
  (value) =>
    value === undefined || value === null || check(value);
const listOf =
  (check: Check): Check =>
  (value) =>
    Array.isArray(value) && value.every(check);
const oneOf =
  (...allowed: string[]): Check =>
  (value) =>
    typeof value === "string" && allowed.includes(value);
const object =
  (fields: Record<string, Check>): Check =>
  (value) =>
    isRecord(value) && Object.entries(fields).every(([name, check]) => check(value[name]));

const shape = <T>(description: string, check: Check): AnswerShape<T> => ({
  description,
  matches: (value): value is T => check(value),
});

const actionFields = {
  action_id: string,
  kind: string,
  status: string,
  amount: optional(units),
  to: optional(string),
  tx_hash: optional(string),
  error_code: optional(string),
  rule: optional(string),
  expires_at: optional(string),
};

export const ACTION: AnswerShape<ActionView> = shape("an action", object(actionFields));

export const BALANCE: AnswerShape<BalanceResponse> = shape(
  "a balance",
  object({ address: string, balance: units, decimals: number, symbol: string, block_number: string }),
);

export const NETWORK: AnswerShape<NetworkResponse> = shape(
  "the network's description",
  object({
    chain: object({ chain_id: number, caip2: string, latest_block: nullable(string) }),
    agent: object({ agent_id: string, assigned_wallet: string, capabilities: listOf(string) }),
    rpc: object({ allowed_methods: listOf(string) }),
    features: record,
  }),
);

export const POLICY: AnswerShape<PolicyResponse> = shape(
  "a spending policy",
  object({
    policy: nullable(record),
    version: nullable(number),
    node_frozen: boolean,
    budgets: listOf(
      object({ rule: string, limit: string, used: string, remaining: string, resets_at: string }),
    ),
  }),
);

export const POLICY_CHECK: AnswerShape<PolicyCheckResult> = shape(
  "a policy check's decision",
  // The gateway names both on every decision, null where there are none.
  object({ decision: oneOf("allow", "hold", "deny"), rule: nullable(string), remaining: nullable(string) }),
);

const identityFields = {
  token: string,
  agent_id: string,
  assigned_wallet: string,
  capabilities: listOf(string),
};

export const REGISTRATION: AnswerShape<RegisterResponse> = shape("a registration", object(identityFields));

export const TOKEN_ROTATION: AnswerShape<TokenRotation> = shape("a token rotation", object(identityFields));

/** POST /x402/authorize: the authorization, or (202) the action the spending policy holds. */
export const X402_AUTHORIZATION: AnswerShape<{ action_id: string; payment_signature: string } | ActionView> =
  shape(
    "an x402 authorization",
    (value) => object({ action_id: string, payment_signature: string })(value) || object(actionFields)(value),
  );

/** POST /rpc: a JSON-RPC 2.0 answer, its result or its error. */
export const JSON_RPC_ANSWER: AnswerShape<{
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}> = shape(
  "a JSON-RPC answer",
  (value) =>
    isRecord(value) &&
    (Object.hasOwn(value, "result") || object({ error: object({ code: number, message: string }) })(value)),
);
