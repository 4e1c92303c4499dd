import { describe, expect, it } from "vitest";
import { encodeCanonicalCbor } from "./canonical-cbor.ts";
import { toHex } from "./hex.ts";
import {
  agentPolicySubject,
  type HeldAction,
  heldActionSubject,
  nodeFreezeSubject,
  OPERATOR_APPROVAL_DOMAIN,
  type OperatorApprovalMessageInput,
  operatorApprovalMessage,
} from "./operator-approval.ts";

const KEY_REF = "ab".repeat(32);
const input: OperatorApprovalMessageInput = {
  envId: "test-env",
  chainId: 77,
  instanceId: `0x${"11".repeat(16)}`,
  op: "approve_held",
  subject: `0x${"22".repeat(32)}`,
  keyId: "alice",
  counter: 1_767_000_000_000,
  expiresAt: 1_767_000_300,
};

describe("operatorApprovalMessage", () => {
  it("is the canonical CBOR of the snake_case map with the domain, whatever the subject's case", () => {
    const expected = encodeCanonicalCbor({
      domain: OPERATOR_APPROVAL_DOMAIN,
      env_id: "test-env",
      chain_id: 77,
      instance_id: input.instanceId,
      op: "approve_held",
      subject: input.subject,
      policy_before: null,
      key_id: "alice",
      counter: input.counter,
      expires_at: input.expiresAt,
    });
    expect(toHex(operatorApprovalMessage(input))).toBe(toHex(expected));
    expect(
      toHex(
        operatorApprovalMessage({
          ...input,
          subject: input.subject.toUpperCase().replace("0X", "0x") as never,
        }),
      ),
    ).toBe(toHex(expected));
  });

  it.each([
    ["envId", "other-env"],
    ["chainId", 78],
    ["instanceId", `0x${"33".repeat(16)}`],
    ["op", "set_agent_policy"],
    ["subject", `0x${"44".repeat(32)}`],
    ["keyId", "bob"],
    ["counter", input.counter + 1],
    ["expiresAt", input.expiresAt + 1],
    ["policyBefore", `0x${"55".repeat(32)}`],
  ] as const)("differs when %s differs", (field, value) => {
    expect(toHex(operatorApprovalMessage({ ...input, [field]: value }))).not.toBe(
      toHex(operatorApprovalMessage(input)),
    );
  });

  it("is v3: a v1 message (no policy_before) of the same approval is other bytes", () => {
    expect(OPERATOR_APPROVAL_DOMAIN).toBe("agent-wallet/operator-approval/v3");
    const v1 = encodeCanonicalCbor({
      domain: "agent-wallet/operator-approval/v1",
      env_id: "test-env",
      chain_id: 77,
      instance_id: input.instanceId,
      op: "approve_held",
      subject: input.subject,
      key_id: "alice",
      counter: input.counter,
      expires_at: input.expiresAt,
    });
    expect(toHex(operatorApprovalMessage(input))).not.toBe(toHex(v1));
  });
});

describe("subjects", () => {
  const action: HeldAction = {
    instanceId: input.instanceId,
    keyRef: KEY_REF,
    kind: "transfer",
    ref: "6f1c2a0e-8d4b-4c1e-9a57-3b2f0c9d8e71",
    to: "0x3333333333333333333333333333333333333333",
    valueUnits: 5000n,
  };

  it.each([
    ["instanceId", `0x${"33".repeat(16)}`],
    ["keyRef", "cd".repeat(32)],
    ["kind", "x402"],
    ["ref", "7f1c2a0e-8d4b-4c1e-9a57-3b2f0c9d8e71"],
    ["to", "0x4444444444444444444444444444444444444444"],
    ["valueUnits", 5001n],
  ] as const)("heldActionSubject differs when %s differs", (field, value) => {
    expect(heldActionSubject({ ...action, [field]: value })).not.toBe(heldActionSubject(action));
  });

  it("heldActionSubject reads the recipient and ref without case", () => {
    expect(
      heldActionSubject({
        ...action,
        to: action.to.toUpperCase().replace("0X", "0x"),
        ref: action.ref.toUpperCase(),
      }),
    ).toBe(heldActionSubject(action));
  });

  it("agentPolicySubject differs by key and by policy, and is one for documents of one meaning", () => {
    const policy = {
      transfers: { daily_units: "1000", allow: ["0x3333333333333333333333333333333333333333"] },
    };
    const subject = agentPolicySubject(KEY_REF, policy);
    expect(agentPolicySubject("cd".repeat(32), policy)).not.toBe(subject);
    expect(agentPolicySubject(KEY_REF, { transfers: { daily_units: "1001" } })).not.toBe(subject);
    expect(agentPolicySubject(KEY_REF, null)).not.toBe(subject);
    expect(agentPolicySubject(KEY_REF, { ...policy, x402: {}, frozen: false })).toBe(subject);
  });

  it("nodeFreezeSubject differs by the state asked and the freeze epoch, and from every other subject", () => {
    expect(nodeFreezeSubject(false, 1)).not.toBe(nodeFreezeSubject(true, 1));
    expect(nodeFreezeSubject(false, 1)).not.toBe(nodeFreezeSubject(false, 2));
    expect(nodeFreezeSubject(false, 0)).not.toBe(agentPolicySubject(KEY_REF, null));
  });
});
