import { describe, expect, it } from "vitest";
import { encodeCanonicalCbor } from "./canonical-cbor.ts";
import {
  authorityPublicKey,
  capabilitySchema,
  capabilitySigningPreimage,
  mintCapability,
  payloadBinding,
  verifyCapabilitySignature,
} from "./capability.ts";
import { fromHex, toHex } from "./hex.ts";

const INSTANCE = `0x${"5a".repeat(16)}`;
const secret = fromHex(`0x${"07".repeat(32)}`);
const params = { namespace: "agent-transfer", count: 10, batch_id: "b-1" };
const mint = () =>
  mintCapability({
    authoritySecret: secret,
    op: "generate_keys",
    params,
    requestId: "r-1",
    chainId: 77,
    envId: "dev",
    instanceId: INSTANCE,
    counter: 1,
  });

describe("capability objects", () => {
  it("mints a schema-valid, admin-scoped capability that verifies", () => {
    const cap = mint();
    expect(capabilitySchema.parse(cap)).toEqual(cap);
    expect(cap).toMatchObject({
      ver: 2,
      instance_id: INSTANCE,
      op: "generate_keys",
      scope: "admin",
      counter: 1,
      authority: authorityPublicKey(secret),
    });
    expect(verifyCapabilitySignature(cap)).toBe(true);
  });

  it("scopes restore_backup to the recovery tier", () => {
    const cap = mintCapability({
      authoritySecret: secret,
      op: "restore_backup",
      params: { envelope: Uint8Array.of(1) },
      requestId: "r",
      chainId: 77,
      envId: "dev",
      instanceId: INSTANCE,
      counter: 1,
    });
    expect(cap.scope).toBe("recovery");
  });

  it("signs the domain label, a NUL and the canonical CBOR of the body", () => {
    const { sig: _sig, ...body } = mint();
    const preimage = capabilitySigningPreimage(body);
    const label = new TextEncoder().encode("svc-hsm/agent-cap/v1\0");
    expect(toHex(preimage.subarray(0, label.length))).toBe(toHex(label));
    expect(toHex(preimage.subarray(label.length))).toBe(toHex(encodeCanonicalCbor(body)));
  });

  it("binds the op and canonical params, independent of key order", () => {
    const binding = payloadBinding("generate_keys", params);
    expect(payloadBinding("generate_keys", { batch_id: "b-1", count: 10, namespace: "agent-transfer" })).toBe(
      binding,
    );
    expect(payloadBinding("export_backup", params)).not.toBe(binding);
    expect(payloadBinding("generate_keys", { ...params, count: 11 })).not.toBe(binding);
  });

  it("fails verification when any field or the signature changes", () => {
    const cap = mint();
    for (const change of [
      { counter: 2 },
      { env_id: "prod" },
      { instance_id: `0x${"5b".repeat(16)}` },
      { chain_id: 1 },
      { op: "export_backup" },
      { request_id: "r-2" },
    ]) {
      expect(verifyCapabilitySignature({ ...cap, ...change })).toBe(false);
    }
    const other = authorityPublicKey(fromHex(`0x${"08".repeat(32)}`));
    expect(verifyCapabilitySignature({ ...cap, authority: other })).toBe(false);
    expect(verifyCapabilitySignature({ ...cap, sig: `0x${"00".repeat(64)}` })).toBe(false);
  });
});
