import { describe, expect, it } from "vitest";
import { classifyRegistrationIp, hashIpGroup } from "./ip-classification.ts";

const strict = { allowLoopback: false };
const local = { allowLoopback: true };

describe("classifyRegistrationIp", () => {
  it("accepts public addresses and groups IPv4 per address, IPv6 per /64", () => {
    expect(classifyRegistrationIp("81.2.69.160", strict)).toEqual({
      ok: true,
      value: { ip: "81.2.69.160", group: "81.2.69.160" },
    });
    expect(classifyRegistrationIp("2A00:1450:4001:81C::200E", strict)).toEqual({
      ok: true,
      value: { ip: "2a00:1450:4001:81c::200e", group: "2a00:1450:4001:81c::/64" },
    });
  });

  it("judges IPv4-mapped and NAT64 addresses as the IPv4 address they carry", () => {
    for (const spelling of [
      "::ffff:81.2.69.160",
      "::ffff:5102:45a0",
      "64:ff9b::81.2.69.160",
      "64:ff9b::5102:45a0",
    ]) {
      expect(classifyRegistrationIp(spelling, strict), spelling).toEqual({
        ok: true,
        value: { ip: "81.2.69.160", group: "81.2.69.160" },
      });
    }
    expect(classifyRegistrationIp("64:ff9b::10.0.0.1", strict)).toEqual({ ok: false, error: "not_public" });
  });

  it.each([
    "100::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2002:c000:0204::1",
    "3fff::1",
    "fec0::1",
    "64:ff9b:1::a00:1",
    "198.18.0.1",
    "192.0.0.8",
    "192.88.99.1",
  ])("refuses the non-global %s", (ip) => {
    expect(classifyRegistrationIp(ip, strict)).toEqual({ ok: false, error: "not_public" });
  });

  it("lets loopback register only with the local switch, each address its own group", () => {
    expect(classifyRegistrationIp("127.0.0.5", strict)).toEqual({ ok: false, error: "not_public" });
    expect(classifyRegistrationIp("127.0.0.5", local)).toEqual({
      ok: true,
      value: { ip: "127.0.0.5", group: "127.0.0.5" },
    });
    expect(classifyRegistrationIp("::1", local)).toEqual({ ok: true, value: { ip: "::1", group: "::1" } });
    expect(classifyRegistrationIp("::ffff:127.0.0.6", local)).toMatchObject({
      ok: true,
      value: { group: "127.0.0.6" },
    });
  });

  it.each(["10.0.0.1", "192.168.1.1", "fd00::1", "fe80::1", "169.254.0.1", "0.0.0.0", "::", "203.0.113.1"])(
    "still refuses %s with the local switch on",
    (ip) => {
      expect(classifyRegistrationIp(ip, local)).toEqual({ ok: false, error: "not_public" });
    },
  );

  it("refuses what is not one address", () => {
    expect(classifyRegistrationIp(undefined, strict)).toEqual({ ok: false, error: "missing" });
    expect(classifyRegistrationIp("", strict)).toEqual({ ok: false, error: "missing" });
    for (const value of [
      "81.2.69.160, 81.2.69.161",
      " 81.2.69.160",
      "81.2.69.160:80",
      "[2a00:1450::1]",
      "2a00:1450::1%1",
    ]) {
      expect(classifyRegistrationIp(value, strict), value).toEqual({ ok: false, error: "malformed" });
    }
  });
});

describe("hashIpGroup", () => {
  it("is an HMAC-SHA-256 in hex under the secret, never the address", () => {
    const a = hashIpGroup("s".repeat(32), "81.2.69.160");
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(a).not.toContain("81.2");
    expect(hashIpGroup("t".repeat(32), "81.2.69.160")).not.toBe(a);
    expect(hashIpGroup("s".repeat(32), "81.2.69.160")).toBe(a);
  });
});
