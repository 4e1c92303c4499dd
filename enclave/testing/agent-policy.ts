/** Helpers of the agent policy tests: a node policy, agent keys, operator keys and their approvals. */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type { Address } from "viem";
import {
  generateOperatorKey,
  type OperatorKey,
  readOperatorKey,
  signOperatorApproval,
} from "../../ops/lib/operator-key.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { EnclaveResponse } from "../../shared/enclave-protocol.ts";
import type { Hex } from "../../shared/hex.ts";
import { type OperatorApprovedOp, operatorApprovalToWire } from "../../shared/operator-approval.ts";
import type { EnclaveFixture } from "../../testing/enclave-process.ts";
import { instanceIdOf, privileged } from "./capabilities.ts";
import type { RawEnclaveClient } from "./raw-client.ts";

export const NODE_PAY_TO: Address = "0x2222222222222222222222222222222222222222";
export const NODE_X402_UNITS = 10_000n;
export const RECIPIENT: Address = "0x3333333333333333333333333333333333333333";
/** 21000 gas at 1 gwei: 21 units of fee on every transfer. */
export const FEE_UNITS = 21n;

/** The node's policy: wide transfer limits, the sealed pair, and a ceiling when given. */
export function nodePolicy(ceiling?: {
  maxUnits: string;
  payees: Address[] | null;
}): Record<string, unknown> {
  return {
    per_tx_limit_units: "10000000",
    daily_limit_units: "100000000",
    recipient_allowlist: null,
    x402_amount_units: NODE_X402_UNITS.toString(),
    x402_pay_to: NODE_PAY_TO,
    x402_max_timeout_seconds: 180,
    operator_pool: "0x00000000000000000000000000000000000000aa",
    fee_ceiling_wei: "1000000000000000",
    x402_validity_margin_seconds: 6,
    x402_daily_limit: 1000,
    settler_daily_fee_units: "1000000000",
    ...(ceiling ? { x402_max_per_payment_units: ceiling.maxUnits, x402_payees: ceiling.payees } : {}),
  };
}

export type AgentKey = { key_ref: string; address: Address };

export async function agentKeys(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
  count: number,
): Promise<AgentKey[]> {
  const batch = await privileged(client, fixture, "generate_keys", {
    namespace: "agent-transfer",
    count,
    batch_id: `policy-${randomUUID()}`,
  });
  return batch.keys as AgentKey[];
}

let nonce = 0;
/** sign_transfer's params: `value` units to RECIPIENT (cost value + 21). */
export function transfer(
  key: AgentKey,
  value: bigint,
  change: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    key_ref: key.key_ref,
    from: key.address,
    chain_id: CHAIN_ID,
    to: RECIPIENT,
    value_units: value.toString(),
    nonce: String(nonce++),
    max_fee_per_gas: "1000000000",
    max_priority_fee_per_gas: "1000000000",
    gas_limit: "21000",
    ...change,
  };
}

/** sign_filler's params: a filler of `key` at the nonce of a transfer it signed. */
export function filler(key: AgentKey, nonce: unknown): Record<string, unknown> {
  return {
    key_ref: key.key_ref,
    from: key.address,
    chain_id: CHAIN_ID,
    nonce,
    max_fee_per_gas: "1000000000",
    max_priority_fee_per_gas: "1000000000",
  };
}

let x402Nonces = 0;
/** sign_x402_authorization's params, valid 60 s from the wall clock's now unless `nowSeconds`. */
export function x402(
  key: AgentKey,
  to: Address,
  value: bigint,
  change: Record<string, unknown> = {},
  nowSeconds = Math.floor(Date.now() / 1000),
): Record<string, unknown> {
  return {
    key_ref: key.key_ref,
    from: key.address,
    to,
    value_units: value.toString(),
    valid_after: "0",
    valid_before: String(nowSeconds + 60),
    nonce: `0x${(++x402Nonces).toString(16).padStart(64, "0")}`,
    ...change,
  };
}

/** What a response comes to: "signed", or its code, detail and rule. */
export const outcome = (response: EnclaveResponse) =>
  response.ok
    ? "signed"
    : {
        code: response.error.code,
        ...(response.error.detail ? { detail: response.error.detail } : {}),
        ...(response.error.rule ? { rule: response.error.rule } : {}),
      };

/** An operator with an enrolled P-256 key, signing approvals for one enclave. */
export type Operator = {
  keyId: string;
  key: OperatorKey;
  /**
   * A wire approval of `op` over `subject` (a set_agent_policy's over `policyBefore`, the
   * agentPolicySubject of the policy it replaces); the counter grows on each unless given.
   */
  approve: (
    op: OperatorApprovedOp,
    subject: Hex,
    change?: Partial<{ counter: number; expiresAt: number; policyBefore: Hex }>,
  ) => Promise<Record<string, unknown>>;
};

let counter = Date.now();
/** The next counter of the tests' operator approvals (each above the last). */
export const nextOperatorCounter = () => ++counter;

/** Makes an operator key in the fixture's folder and enrolls it with the policy authority. */
export async function enrolledOperator(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
  keyId = "alice",
): Promise<Operator> {
  const file = join(fixture.dir, `${keyId}-${randomUUID()}.key`);
  await generateOperatorKey(file);
  const key = await readOperatorKey(file);
  await privileged(client, fixture, "enroll_operator_key", {
    key_id: keyId,
    public_key: key.publicKey,
    label: keyId,
  });
  return { keyId, key, approve: approver(client, fixture, keyId, key) };
}

/** Signs approvals with `key` under the name `keyId` (enrolled or not). */
export function approver(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
  keyId: string,
  key: OperatorKey,
): Operator["approve"] {
  return async (op, subject, change = {}) =>
    operatorApprovalToWire(
      signOperatorApproval(key, {
        envId: fixture.envId,
        chainId: CHAIN_ID,
        instanceId: await instanceIdOf(client),
        op,
        subject,
        ...(change.policyBefore === undefined ? {} : { policyBefore: change.policyBefore }),
        keyId,
        counter: change.counter ?? nextOperatorCounter(),
        expiresAt: change.expiresAt ?? Math.floor(Date.now() / 1000) + 300,
      }),
    );
}
