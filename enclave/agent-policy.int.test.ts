import { randomUUID, sign as signBytes } from "node:crypto";
import { join } from "node:path";
import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateOperatorKey, readOperatorKey } from "../ops/lib/operator-key.ts";
import { encodeCanonicalCbor } from "../shared/canonical-cbor.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { type Hex, toHex } from "../shared/hex.ts";
import {
  agentPolicySubject,
  heldActionSubject,
  heldApprovalSubject,
  nodeFreezeSubject,
} from "../shared/operator-approval.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import {
  type AgentKey,
  agentKeys,
  approver,
  enrolledOperator,
  FEE_UNITS,
  NODE_PAY_TO,
  NODE_X402_UNITS,
  nextOperatorCounter,
  nodePolicy,
  type Operator,
  outcome,
  RECIPIENT,
  transfer,
  x402,
} from "./testing/agent-policy.ts";
import { instanceIdOf, mintFor, privileged } from "./testing/capabilities.ts";
import { randomP256PublicKey } from "./testing/p256-points.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// Issue: the origin holds the admin capability. With it alone, a compromised origin may tighten an
// agent's policy or freeze, never loosen, unfreeze or approve: those need an enrolled operator's
// P-256 signature over the exact change, which it cannot forge, replay or move. And whatever the
// gateway checks, the enclave re-checks each agent's policy on every signature it makes.

const SELLER_A: Address = "0x4444444444444444444444444444444444444444";
const SELLER_B: Address = "0x5555555555555555555555555555555555555555";

describe("agent policies in the enclave, with the origin's admin capability (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let keys: AgentKey[];
  let operator: Operator;
  let instanceId: string;

  /** The policy the enclave holds for `key` now (its normal form), or null for none. */
  const sealedPolicy = async (key: AgentKey) =>
    expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref })).policy as Record<
      string,
      unknown
    > | null;
  /** set_agent_policy as the origin sends it, with the operator's approval when one is given. */
  const sendPolicy = async (key: AgentKey, policy: Record<string, unknown> | null, approval?: unknown) => {
    const params: Record<string, unknown> = { key_ref: key.key_ref, policy };
    if (approval !== undefined) params.operator = approval;
    return client.request(
      "set_agent_policy",
      params,
      await mintFor(client, fixture, "set_agent_policy", params),
    );
  };
  /** The operator's approval of `key`'s policy becoming `policy`, over the one the enclave holds now. */
  const approvePolicy = async (key: AgentKey, policy: Record<string, unknown> | null) =>
    operator.approve("set_agent_policy", agentPolicySubject(key.key_ref, policy as never), {
      policyBefore: agentPolicySubject(key.key_ref, (await sealedPolicy(key)) as never),
    });
  const setPolicy = async (key: AgentKey, policy: Record<string, unknown> | null, withOperator = false) =>
    sendPolicy(key, policy, withOperator ? await approvePolicy(key, policy) : undefined);
  const admin = async (op: "approve_held" | "set_node_frozen", params: Record<string, unknown>) =>
    client.request(op, params, await mintFor(client, fixture, op, params));
  /** The node's freeze epoch the enclave holds now (get_policy). */
  const freezeEpoch = async () =>
    expectOk(await client.request("get_policy", {})).node_freeze_epoch as number;
  /** set_node_frozen unfreezing with `by`'s approval, signed over the freeze holding now unless `epoch`. */
  const unfreezeApproval = async (by: Operator, epoch?: number) => {
    const signedOver = epoch ?? (await freezeEpoch());
    return {
      frozen: false,
      freeze_epoch: signedOver,
      operator: await by.approve("set_node_frozen", nodeFreezeSubject(false, signedOver)),
    };
  };
  const held = (
    key: AgentKey,
    kind: "transfer" | "x402",
    ref: string,
    to: string,
    value: bigint,
    expiresAt: number,
  ): Hex =>
    heldApprovalSubject({ instanceId, keyRef: key.key_ref, kind, ref, to, valueUnits: value }, expiresAt);
  const approveHeld = async (
    key: AgentKey,
    action: { kind: "transfer" | "x402"; ref: string; to: string; value: bigint },
    signedFor = action,
  ) => {
    const expiresAt = Math.floor(Date.now() / 1000) + 3600;
    const params = {
      key_ref: key.key_ref,
      kind: action.kind,
      ref: action.ref,
      to: action.to,
      value_units: action.value.toString(),
      expires_at: expiresAt,
      operator: await operator.approve(
        "approve_held",
        held(key, signedFor.kind, signedFor.ref, signedFor.to, signedFor.value, expiresAt),
      ),
    };
    return { params, response: await admin("approve_held", params) };
  };
  const sign = (params: Record<string, unknown>) => client.request("sign_transfer", params);
  const signX402 = (params: Record<string, unknown>) => client.request("sign_x402_authorization", params);

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "agent-policy" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    await privileged(client, fixture, "configure_policy", nodePolicy({ maxUnits: "1000000", payees: null }));
    keys = await agentKeys(client, fixture, 12);
    operator = await enrolledOperator(client, fixture);
    instanceId = await instanceIdOf(client);
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("tightens under the admin capability alone (a figure set or lowered, a payee removed, a freeze); a loosening is operator_required naming its rule, and passes with an operator's approval", async () => {
    const key = keys[0]!;
    expect(expectOk(await setPolicy(key, { transfers: { daily_units: "1000" } }))).toMatchObject({
      version: 1,
    });
    expect(expectOk(await setPolicy(key, { transfers: { daily_units: "500" } }))).toMatchObject({
      version: 2,
    });
    expect(outcome(await setPolicy(key, { transfers: { daily_units: "5000" } }))).toEqual({
      code: "capability_rejected",
      detail: "operator_required",
      rule: "transfers.daily_units",
    });
    expect(outcome(await setPolicy(key, null))).toMatchObject({ detail: "operator_required" });
    const twoPayees = {
      transfers: { daily_units: "500" },
      x402: {
        payees: [
          { pay_to: SELLER_A, per_payment_units: "50000" },
          { pay_to: SELLER_B, per_payment_units: "10000" },
        ],
      },
    };
    expect(outcome(await setPolicy(key, twoPayees))).toEqual({
      code: "capability_rejected",
      detail: "operator_required",
      rule: "x402.payees",
    });
    expect(expectOk(await setPolicy(key, twoPayees, true))).toMatchObject({ version: 3 });
    const onePayee = {
      transfers: { daily_units: "500" },
      x402: { payees: [{ pay_to: SELLER_A, per_payment_units: "50000" }] },
    };
    expect(expectOk(await setPolicy(key, onePayee))).toMatchObject({ version: 4 });
    expect(expectOk(await setPolicy(key, { ...onePayee, frozen: true }))).toMatchObject({ version: 5 });
    expect(outcome(await setPolicy(key, onePayee))).toMatchObject({
      detail: "operator_required",
      rule: "frozen",
    });
    const status = expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref }));
    expect(status).toMatchObject({
      version: 5,
      policy: {
        x402: { payees: [{ pay_to: SELLER_A.toLowerCase(), per_payment_units: "50000" }] },
        frozen: true,
      },
      node_frozen: false,
    });
  });

  it("an operator's approval of a loosening held back while the agent froze itself is operator_policy_changed: the freeze stands; signed over the frozen policy, the loosening passes", async () => {
    const key = keys[10]!;
    const a = { transfers: { daily_units: "1000" } };
    const b = { transfers: { daily_units: "5000" } };
    expectOk(await setPolicy(key, a));
    // The operator approves A → B; a compromised origin keeps the approval instead of sending it.
    const heldBack = await approvePolicy(key, b);
    // The agent freezes itself (A → A'): a tightening, the admin capability alone.
    const frozen = { ...a, frozen: true };
    expectOk(await setPolicy(key, frozen));
    const sent = await sendPolicy(key, b, heldBack);
    expect(await sealedPolicy(key), "the enclave applied the held-back B over the agent's freeze").toEqual(
      frozen,
    );
    expect(outcome(sent)).toEqual({ code: "capability_rejected", detail: "operator_policy_changed" });
    // The operator, shown the frozen policy, approves the loosening over it: that one is taken.
    expect(expectOk(await setPolicy(key, b, true))).toMatchObject({ policy: b });
  });

  it("an approval in the earlier format (domain v1, naming only the policy after) is operator_signature: it cannot be replayed as one of today", async () => {
    const key = keys[11]!;
    const after = { transfers: { daily_units: "5000" } };
    expectOk(await setPolicy(key, { transfers: { daily_units: "1000" } }));
    const expiresAt = Math.floor(Date.now() / 1000) + 300;
    const counter = nextOperatorCounter();
    const v1 = encodeCanonicalCbor({
      domain: "agent-wallet/operator-approval/v1",
      env_id: fixture.envId,
      chain_id: CHAIN_ID,
      instance_id: instanceId,
      op: "set_agent_policy",
      subject: agentPolicySubject(key.key_ref, after),
      key_id: operator.keyId,
      counter,
      expires_at: expiresAt,
    });
    const signature = toHex(
      new Uint8Array(signBytes("sha256", v1, { key: operator.key.privateKey, dsaEncoding: "ieee-p1363" })),
    );
    const approval = { key_id: operator.keyId, counter, expires_at: expiresAt, signature };
    expect(outcome(await sendPolicy(key, after, approval))).toEqual({
      code: "capability_rejected",
      detail: "operator_signature",
    });
    expect(await sealedPolicy(key)).toEqual({ transfers: { daily_units: "1000" } });
  });

  it("a frozen agent is refused policy_denied, rule frozen; nothing is signed", async () => {
    const key = keys[1]!;
    expectOk(await setPolicy(key, { frozen: true }));
    expect(outcome(await sign(transfer(key, 1n)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "frozen",
    });
    expect(outcome(await signX402(x402(key, NODE_PAY_TO, NODE_X402_UNITS)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "frozen",
    });
  });

  it("signing over an agent's limits straight over the socket is policy_denied with the rule named: daily units, per transaction, a payee's per-payment, the x402 daily count", async () => {
    const key = keys[2]!;
    const policy = {
      transfers: { per_tx_units: "2000", daily_units: "3000" },
      x402: {
        payees: [
          { pay_to: SELLER_A, per_payment_units: "50000" },
          { pay_to: SELLER_B, per_payment_units: "10000" },
        ],
        daily_count: 2,
      },
    };
    expectOk(await setPolicy(key, policy, true));
    expect(outcome(await sign(transfer(key, 2000n)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "transfers.per_tx_units",
    });
    expectOk(await sign(transfer(key, 1500n)));
    expect(outcome(await sign(transfer(key, 1500n)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "transfers.daily_units",
    });
    // Ceiling 1 USDC to any payee: the node allows A and B; the policy bounds each.
    expectOk(await signX402(x402(key, SELLER_A, 40_000n)));
    expect(outcome(await signX402(x402(key, SELLER_B, 20_000n)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: `x402.payees[${SELLER_B.toLowerCase()}].per_payment_units`,
    });
    expectOk(await signX402(x402(key, SELLER_B, 10_000n)));
    expect(outcome(await signX402(x402(key, SELLER_A, 1n)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "x402.daily_count",
    });
    const status = expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref }));
    expect(status.usage).toMatchObject({
      transfers: { day_units: String(1500n + FEE_UNITS), day_count: 1 },
      x402: {
        day_units: "50000",
        day_count: 2,
        payees: { [SELLER_A.toLowerCase()]: "40000", [SELLER_B.toLowerCase()]: "10000" },
      },
    });
  });

  it("the node's ceiling: a policy listing a payee pays it within the ceiling, and over it is x402_ceiling", async () => {
    const key = keys[3]!;
    expectOk(
      await setPolicy(key, { x402: { payees: [{ pay_to: SELLER_A, per_payment_units: "5000000" }] } }, true),
    );
    expectOk(await signX402(x402(key, SELLER_A, 1_000_000n)));
    expect(outcome(await signX402(x402(key, SELLER_A, 1_000_001n)))).toEqual({
      code: "cap_exceeded",
      detail: "x402_ceiling",
      rule: "x402_max_per_payment_units",
    });
    // A key without a policy: the pair, and over the ceiling still the ceiling's refusal.
    const bare = keys[7]!;
    expectOk(await signX402(x402(bare, NODE_PAY_TO, NODE_X402_UNITS)));
    expect(outcome(await signX402(x402(bare, SELLER_B, 1_000_001n)))).toEqual({
      code: "cap_exceeded",
      detail: "x402_ceiling",
      rule: "x402_max_per_payment_units",
    });
  });

  it("a key without a policy pays the pair alone, though a ceiling is sealed: an address of the origin's choosing, or another amount, is refused by name", async () => {
    const bare = keys[9]!;
    // Under the ceiling of 1 USDC to any payee: what a compromised origin would pay itself with.
    expect(outcome(await signX402(x402(bare, SELLER_B, 999_999n)))).toEqual({
      code: "cap_exceeded",
      detail: "x402_pay_to",
    });
    expect(outcome(await signX402(x402(bare, NODE_PAY_TO, NODE_X402_UNITS + 1n)))).toEqual({
      code: "cap_exceeded",
      detail: "x402_amount",
    });
    expectOk(await signX402(x402(bare, NODE_PAY_TO, NODE_X402_UNITS)));
  });

  it("a payee listed twice is paid under whichever of its entries allows the payment, not only the one with the larger per-payment limit", async () => {
    // The enclave signs without the resource, so both entries of SELLER_A apply to every payment
    // to it; each alone allows a payment of 10,000 after 50,000 paid today (the second does).
    const key = keys[8]!;
    const policy = {
      x402: {
        payees: [
          {
            pay_to: SELLER_A,
            resource_prefix: "https://a.example/premium/",
            per_payment_units: "50000",
            daily_units: "50000",
          },
          {
            pay_to: SELLER_A,
            resource_prefix: "https://a.example/basic/",
            per_payment_units: "10000",
            daily_units: "1000000",
          },
        ],
      },
    };
    expectOk(await setPolicy(key, policy, true));
    expectOk(await signX402(x402(key, SELLER_A, 50_000n)));
    expectOk(await signX402(x402(key, SELLER_A, 10_000n)));
    // Past what either entry allows, the refusal still names the payee's limit.
    expect(outcome(await signX402(x402(key, SELLER_A, 20_000n)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: `x402.payees[${SELLER_A.toLowerCase()}].daily_units`,
    });
  });

  it("a held transfer signs once its action is approved, once; the approval moved to another action id is policy_held", async () => {
    const key = keys[4]!;
    expectOk(await setPolicy(key, { approval_above_units: "1000" }));
    const actionId = randomUUID();
    expect(outcome(await sign(transfer(key, 5000n, { action_id: actionId })))).toEqual({
      code: "cap_exceeded",
      detail: "policy_held",
      rule: "approval_above_units",
    });
    const approved = await approveHeld(key, { kind: "transfer", ref: actionId, to: RECIPIENT, value: 5000n });
    expect(expectOk(approved.response)).toEqual({
      approval: heldActionSubject({
        instanceId,
        keyRef: key.key_ref,
        kind: "transfer",
        ref: actionId,
        to: RECIPIENT,
        valueUnits: 5000n,
      }),
    });
    // Another action of the same recipient and value does not ride on it.
    expect(outcome(await sign(transfer(key, 5000n, { action_id: randomUUID() })))).toMatchObject({
      detail: "policy_held",
    });
    expectOk(await sign(transfer(key, 5000n, { action_id: actionId })));
    // Used: a second signature of the same action is held again.
    expect(outcome(await sign(transfer(key, 5000n, { action_id: actionId })))).toEqual({
      code: "cap_exceeded",
      detail: "policy_held",
      rule: "approval_above_units",
    });
  });

  it("a held x402 authorization signs once its nonce is approved, once; another nonce of the same payee and amount is policy_held", async () => {
    const [key] = await agentKeys(client, fixture, 1);
    expectOk(await setPolicy(key!, { approval_above_units: "1000" }));
    const asked = x402(key!, NODE_PAY_TO, NODE_X402_UNITS);
    const nonce = asked.nonce as string;
    expect(outcome(await signX402(asked))).toEqual({
      code: "cap_exceeded",
      detail: "policy_held",
      rule: "approval_above_units",
    });
    expectOk(
      (await approveHeld(key!, { kind: "x402", ref: nonce, to: NODE_PAY_TO, value: NODE_X402_UNITS }))
        .response,
    );
    expect(outcome(await signX402(x402(key!, NODE_PAY_TO, NODE_X402_UNITS)))).toMatchObject({
      detail: "policy_held",
    });
    expectOk(await signX402(asked));
    // Used: the same nonce again (a fresh window) is held again.
    // Mutation: not using up the approval in sign_x402_authorization signs this.
    expect(
      outcome(await signX402({ ...asked, valid_before: String(Number(asked.valid_before) + 30) })),
    ).toEqual({
      code: "cap_exceeded",
      detail: "policy_held",
      rule: "approval_above_units",
    });
  });

  it("approve_held: an unknown key or a signature by a key not enrolled is operator_signature; a signature made for another action is operator_signature", async () => {
    const key = keys[4]!;
    const action = { kind: "transfer" as const, ref: randomUUID(), to: RECIPIENT, value: 7000n };
    const file = join(fixture.dir, `mallory-${randomUUID()}.key`);
    await generateOperatorKey(file);
    const mallory = await readOperatorKey(file);
    const expiresAt = Math.floor(Date.now() / 1000) + 3600;
    const subject = held(key, action.kind, action.ref, action.to, action.value, expiresAt);
    for (const forged of [
      await approver(client, fixture, "mallory", mallory)("approve_held", subject),
      await approver(client, fixture, operator.keyId, mallory)("approve_held", subject),
    ]) {
      const params = {
        key_ref: key.key_ref,
        kind: action.kind,
        ref: action.ref,
        to: action.to,
        value_units: "7000",
        expires_at: expiresAt,
        operator: forged,
      };
      expect(outcome(await admin("approve_held", params))).toEqual({
        code: "capability_rejected",
        detail: "operator_signature",
      });
    }
    const other = { ...action, ref: randomUUID() };
    const moved = await approveHeld(key, other, action);
    expect(outcome(moved.response)).toEqual({ code: "capability_rejected", detail: "operator_signature" });
    const moreValue = await approveHeld(key, { ...action, value: 70_000n }, action);
    expect(outcome(moreValue.response)).toMatchObject({ detail: "operator_signature" });
    // The operator's approval relayed with a longer life than the one it signed.
    const longer = {
      key_ref: key.key_ref,
      kind: action.kind,
      ref: action.ref,
      to: action.to,
      value_units: "7000",
      expires_at: expiresAt + 86_400,
      operator: await operator.approve("approve_held", subject),
    };
    expect(outcome(await admin("approve_held", longer))).toEqual({
      code: "capability_rejected",
      detail: "operator_signature",
    });
  });

  it("a recorded approve_held frame replayed is refused: its capability, then (re-minted) its operator counter as operator_replay", async () => {
    const key = keys[4]!;
    const action = { kind: "transfer" as const, ref: randomUUID(), to: RECIPIENT, value: 6000n };
    const expiresAt = Math.floor(Date.now() / 1000) + 3600;
    const params = {
      key_ref: key.key_ref,
      kind: action.kind,
      ref: action.ref,
      to: action.to,
      value_units: action.value.toString(),
      expires_at: expiresAt,
      operator: await operator.approve(
        "approve_held",
        held(key, action.kind, action.ref, action.to, action.value, expiresAt),
      ),
    };
    const recorded = { params };
    const cap = await mintFor(client, fixture, "approve_held", params);
    expectOk(await client.request("approve_held", params, cap));
    // The same frame again: its capability's counter is spent.
    expect(outcome(await client.request("approve_held", recorded.params, cap))).toEqual({
      code: "capability_rejected",
    });
    // A fresh capability cannot revive the operator's signature: its counter is spent too.
    expect(outcome(await admin("approve_held", recorded.params))).toEqual({
      code: "capability_rejected",
      detail: "operator_replay",
    });
  });

  it("the node freeze: admin alone freezes (every agent key, with or without a policy, is policy_denied rule node.frozen); unfreezing is operator_required, then passes with an approval", async () => {
    const [withPolicy, bare] = [keys[5]!, keys[6]!];
    expectOk(await setPolicy(withPolicy, { transfers: { daily_units: "100000" } }));
    expect(expectOk(await admin("set_node_frozen", { frozen: true }))).toEqual({ frozen: true });
    for (const key of [withPolicy, bare]) {
      expect(outcome(await sign(transfer(key, 1n)))).toEqual({
        code: "cap_exceeded",
        detail: "policy_denied",
        rule: "node.frozen",
      });
      expect(outcome(await signX402(x402(key, NODE_PAY_TO, NODE_X402_UNITS)))).toMatchObject({
        detail: "policy_denied",
        rule: "node.frozen",
      });
    }
    expect(expectOk(await client.request("get_policy", {}))).toMatchObject({ node_frozen: true });
    expect(outcome(await admin("set_node_frozen", { frozen: false }))).toEqual({
      code: "capability_rejected",
      detail: "operator_required",
      rule: "node.frozen",
    });
    // An approval of a freeze is no approval of the unfreezing.
    const epoch = await freezeEpoch();
    const wrong = await operator.approve("set_node_frozen", nodeFreezeSubject(true, epoch));
    expect(
      outcome(await admin("set_node_frozen", { frozen: false, freeze_epoch: epoch, operator: wrong })),
    ).toMatchObject({ detail: "operator_signature" });
    // Nor is an approval carried without the freeze it names.
    const { freeze_epoch: _, ...unnamed } = await unfreezeApproval(operator);
    expect(outcome(await admin("set_node_frozen", unnamed))).toEqual({ code: "malformed" });
    expect(expectOk(await admin("set_node_frozen", await unfreezeApproval(operator)))).toEqual({
      frozen: false,
    });
    expectOk(await sign(transfer(bare, 1n)));
    expectOk(await sign(transfer(withPolicy, 1n)));
  });

  it("operator keys: get_policy lists them; an id re-enrolled with another key is malformed, with its own key idempotent", async () => {
    const listed = expectOk(await client.request("get_policy", {}));
    expect(listed.operator_keys).toEqual([
      { key_id: operator.keyId, public_key: operator.key.publicKey, label: operator.keyId },
    ]);
    const file = join(fixture.dir, `other-${randomUUID()}.key`);
    const { publicKey } = await generateOperatorKey(file);
    const enroll = async (public_key: string) => {
      const params = { key_id: operator.keyId, public_key };
      return client.request(
        "enroll_operator_key",
        params,
        await mintFor(client, fixture, "enroll_operator_key", params),
      );
    };
    expect(outcome(await enroll(publicKey))).toEqual({ code: "malformed" });
    expect(expectOk(await enroll(operator.key.publicKey))).toEqual({
      key_id: operator.keyId,
      public_key: operator.key.publicKey,
    });
  });

  it("an unfreeze approval held back while another operator lifted the freeze does not lift a freeze put on since: operator_policy_changed, the new freeze stands; signed over it, the unfreeze passes", async () => {
    const [key] = await agentKeys(client, fixture, 1);
    const bob = await enrolledOperator(client, fixture, "bob-unfreeze");
    expectOk(await admin("set_node_frozen", { frozen: true }));
    const first = await freezeEpoch();
    // Alice approves lifting this freeze; the compromised origin keeps her approval back.
    const heldBack = await unfreezeApproval(operator);
    // Bob lifts it instead; later an incident freeze is put on (the admin capability alone).
    expectOk(await admin("set_node_frozen", await unfreezeApproval(bob)));
    expectOk(await admin("set_node_frozen", { frozen: true }));
    expect(await freezeEpoch(), "each freeze is a new epoch").toBe(first + 1);
    const sent = outcome(await admin("set_node_frozen", heldBack));
    const sealed = expectOk(await client.request("get_policy", {}));
    expect(sealed.node_frozen, "the enclave lifted the incident freeze with an unfreeze held back").toBe(
      true,
    );
    expect(sent).toEqual({ code: "capability_rejected", detail: "operator_policy_changed" });
    expect(outcome(await sign(transfer(key!, 1n)))).toMatchObject({ rule: "node.frozen" });
    // Putting the freeze on again over itself is no new freeze: an approval of lifting it holds.
    const approved = await unfreezeApproval(operator);
    expectOk(await admin("set_node_frozen", { frozen: true }));
    expect(await freezeEpoch()).toBe(first + 1);
    expect(expectOk(await admin("set_node_frozen", approved))).toEqual({ frozen: false });
    expectOk(await sign(transfer(key!, 1n)));
  });

  it("keeps policies, usage, operator counters and approvals across a kill and a start", async () => {
    const key = keys[2]!;
    const before = expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref }));
    const waiting = keys[4]!;
    const action = { kind: "transfer" as const, ref: randomUUID(), to: RECIPIENT, value: 8000n };
    const approved = await approveHeld(waiting, action);
    expectOk(approved.response);
    client.close();
    await fixture.kill();
    await fixture.start();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    expect(expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref }))).toEqual(before);
    expect(outcome(await admin("approve_held", approved.params))).toMatchObject({
      detail: "operator_replay",
    });
    expectOk(await sign(transfer(waiting, 8000n, { action_id: action.ref })));
    expect(outcome(await sign(transfer(key, 1500n)))).toMatchObject({ rule: "transfers.daily_units" });
  });
});

describe("with no ceiling sealed (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "agent-policy-pair" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    await privileged(client, fixture, "configure_policy", nodePolicy());
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("a policy listing another payee still cannot pay it: the node's pair refuses x402_pay_to", async () => {
    const [key] = await agentKeys(client, fixture, 1);
    const operator = await enrolledOperator(client, fixture);
    const policy = { x402: { payees: [{ pay_to: SELLER_A, per_payment_units: "50000" }] } };
    const params = {
      key_ref: key!.key_ref,
      policy,
      operator: await operator.approve("set_agent_policy", agentPolicySubject(key!.key_ref, policy), {
        policyBefore: agentPolicySubject(key!.key_ref, null),
      }),
    };
    expectOk(
      await client.request(
        "set_agent_policy",
        params,
        await mintFor(client, fixture, "set_agent_policy", params),
      ),
    );
    expect(outcome(await client.request("sign_x402_authorization", x402(key!, SELLER_A, 40_000n)))).toEqual({
      code: "cap_exceeded",
      detail: "x402_pay_to",
    });
    // The pair itself is off this policy's list: the policy refuses it.
    expect(
      outcome(await client.request("sign_x402_authorization", x402(key!, NODE_PAY_TO, NODE_X402_UNITS))),
    ).toEqual({ code: "cap_exceeded", detail: "policy_denied", rule: "x402.payees" });
  });
});

describe("room for operator keys and passkeys (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "operator-room" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("keys and passkeys share room for 64: the next of either is cap_exceeded and not enrolled, one enrolled already still answers as enrolled", async () => {
    const enroll = async (
      op: "enroll_operator_key" | "enroll_operator_passkey",
      params: Record<string, unknown>,
    ) => client.request(op, params, await mintFor(client, fixture, op, params));
    const key = (index: number) => ({ key_id: `operator-${index}`, public_key: randomP256PublicKey() });
    const passkey = (index: number) => ({
      key_id: `passkey-${index}`,
      operator: "Alice Martin",
      credential_id: `credential-${index}-AAAAAAAAAA`,
      public_key: randomP256PublicKey(),
      rp_id: "localhost",
      origin: "http://localhost:8787",
    });
    const firstKey = key(0);
    const firstPasskey = passkey(0);
    expectOk(await enroll("enroll_operator_key", firstKey));
    expectOk(await enroll("enroll_operator_passkey", firstPasskey));
    for (let index = 1; index < 63; index++) expectOk(await enroll("enroll_operator_key", key(index)));

    expect(outcome(await enroll("enroll_operator_key", key(63)))).toEqual({ code: "cap_exceeded" });
    expect(outcome(await enroll("enroll_operator_passkey", passkey(1)))).toEqual({ code: "cap_exceeded" });
    expect(expectOk(await enroll("enroll_operator_key", firstKey))).toEqual(firstKey);
    expect(expectOk(await enroll("enroll_operator_passkey", firstPasskey))).toEqual({
      key_id: firstPasskey.key_id,
      credential_id: firstPasskey.credential_id,
      public_key: firstPasskey.public_key,
    });
    const enrolled = expectOk(await client.request("get_policy", {}));
    expect(enrolled.operator_keys).toHaveLength(63);
    expect(enrolled.operator_passkeys).toHaveLength(1);
  });
});
