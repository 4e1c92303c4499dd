import { describe, expect, it } from "vitest";
import { parseCidrList } from "./cidr.ts";
import { addressGroup, normalizeIp, resolveClientIp } from "./client-ip.ts";
import { selectClientIp } from "./client-ip-middleware.ts";
import { createEdgeSecretVerifier } from "./edge-secret.ts";

function cidrs(text: string) {
  const parsed = parseCidrList(text);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

describe("resolveClientIp", () => {
  const trusted = cidrs("10.0.0.0/8, 2001:db8:1::/48");

  it("uses the socket peer when the peer is not a trusted proxy, whatever X-Forwarded-For says", () => {
    expect(resolveClientIp("198.51.100.7", "1.2.3.4", trusted)).toBe("198.51.100.7");
    expect(resolveClientIp("::ffff:198.51.100.7", "1.2.3.4, 10.0.0.1", trusted)).toBe("198.51.100.7");
  });

  it("takes the right-most hop outside the trusted proxies", () => {
    expect(resolveClientIp("10.0.0.5", "203.0.113.9", trusted)).toBe("203.0.113.9");
    // A client prepending a fake hop cannot move the choice left of the real one.
    expect(resolveClientIp("10.0.0.5", "6.6.6.6, 203.0.113.9, 10.1.1.1", trusted)).toBe("203.0.113.9");
    expect(resolveClientIp("2001:db8:1::2", "2001:DB8:2::7", trusted)).toBe("2001:db8:2::7");
  });

  it("stops at a malformed hop and keeps the last attributable address", () => {
    expect(resolveClientIp("10.0.0.5", "203.0.113.9, garbage", trusted)).toBe("10.0.0.5");
    expect(resolveClientIp("10.0.0.5", "garbage, 10.0.0.9", trusted)).toBe("10.0.0.9");
  });

  it("falls back to the left-most hop when every hop is a trusted proxy", () => {
    expect(resolveClientIp("10.0.0.5", "10.0.0.7, 10.0.0.6", trusted)).toBe("10.0.0.7");
  });

  it("trusts nothing with an empty list", () => {
    expect(resolveClientIp("127.0.0.1", "203.0.113.9", cidrs(""))).toBe("127.0.0.1");
  });
});

describe("normalizeIp", () => {
  it("folds IPv4-mapped IPv6 and rejects non-addresses", () => {
    expect(normalizeIp("::FFFF:192.0.2.1")).toBe("192.0.2.1");
    expect(normalizeIp("2001:DB8::1")).toBe("2001:db8::1");
    expect(normalizeIp("localhost")).toBeNull();
  });

  it("folds every spelling of an IPv4-mapped address and drops a zone", () => {
    for (const spelling of [
      "::ffff:203.0.113.9",
      "::ffff:cb00:7109",
      "0:0:0:0:0:ffff:cb00:7109",
      "::FFFF:CB00:7109",
    ]) {
      expect(normalizeIp(spelling), spelling).toBe("203.0.113.9");
    }
    expect(normalizeIp("2001:0DB8:0000:0000:0000:0000:0000:0001")).toBe("2001:db8::1");
    expect(normalizeIp("fe80::1%eth0")).toBe("fe80::1");
    expect(normalizeIp("1.2.3.4, 5.6.7.8")).toBeNull();
    expect(normalizeIp("1.2.3.4:80")).toBeNull();
  });
});

describe("addressGroup", () => {
  it("keeps an IPv4 address as it is", () => {
    expect(addressGroup("203.0.113.5")).toBe("203.0.113.5");
  });

  it("groups IPv6 by /64, whatever the spelling", () => {
    expect(addressGroup("2001:db8:1:2::a")).toBe("2001:db8:1:2::/64");
    expect(addressGroup("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(addressGroup("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressGroup("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressGroup("64:ff9b:1:2::198.51.100.7")).toBe("64:ff9b:1:2::/64");
    expect(addressGroup("2001:db8:1:3::a")).not.toBe(addressGroup("2001:db8:1:2::a"));
  });

  it("gives each address of ::/64 its own group instead of one shared bucket", () => {
    const groups = ["::1", "::", "::2", "::198.51.100.7"].map(addressGroup);
    expect(groups).toEqual(["::1", "::", "::2", "::c633:6407"]);
    expect(addressGroup("0:0:0:0:0:0:0:1")).toBe("::1");
  });

  it("counts an address that carries IPv4 as that IPv4 address, whatever the spelling", () => {
    for (const spelling of [
      "::ffff:198.51.100.7",
      "::ffff:c633:6407",
      "0:0:0:0:0:FFFF:c633:6407",
      "64:ff9b::198.51.100.7",
      "64:ff9b::c633:6407",
    ]) {
      expect(addressGroup(spelling), spelling).toBe("198.51.100.7");
    }
  });
});

describe("selectClientIp", () => {
  const secret = "e".repeat(64);
  const verify = createEdgeSecretVerifier(secret);
  const none = cidrs("");
  const select = (headers: Partial<Parameters<typeof selectClientIp>[0]>) =>
    selectClientIp(
      {
        remoteAddress: "192.0.2.1",
        forwardedFor: undefined,
        edgeSecret: undefined,
        edgeClientIp: undefined,
        ...headers,
      },
      none,
      verify,
    );
  const from = (headers: Partial<Parameters<typeof selectClientIp>[0]>) => select(headers).ip;

  it("takes X-svc-Client-IP only with the edge secret", () => {
    expect(from({ edgeSecret: secret, edgeClientIp: "198.51.100.7" })).toBe("198.51.100.7");
    expect(select({ edgeSecret: secret, edgeClientIp: "198.51.100.7" }).viaEdge).toBe(true);
    expect(select({ edgeSecret: `${secret}x`, edgeClientIp: "198.51.100.7" }).viaEdge).toBe(false);
    expect(select({ edgeSecret: secret, edgeClientIp: "unknown" }).viaEdge).toBe(false);
    expect(from({ edgeSecret: secret, edgeClientIp: "::ffff:198.51.100.7" })).toBe("198.51.100.7");
    expect(from({ edgeClientIp: "198.51.100.7" })).toBe("192.0.2.1");
    expect(from({ edgeSecret: `${secret}x`, edgeClientIp: "198.51.100.7" })).toBe("192.0.2.1");
    expect(from({ edgeSecret: "", edgeClientIp: "198.51.100.7" })).toBe("192.0.2.1");
  });

  it("falls back to today's rule when the edge's value is no single address", () => {
    expect(from({ edgeSecret: secret, edgeClientIp: "198.51.100.7, 198.51.100.8" })).toBe("192.0.2.1");
    expect(from({ edgeSecret: secret, edgeClientIp: "unknown" })).toBe("192.0.2.1");
  });

  it("never takes X-svc-Client-IP when no edge secret is configured", () => {
    const result = selectClientIp(
      {
        remoteAddress: "192.0.2.1",
        forwardedFor: undefined,
        edgeSecret: secret,
        edgeClientIp: "198.51.100.7",
      },
      none,
      createEdgeSecretVerifier(undefined),
    );
    expect(result).toEqual({ ip: "192.0.2.1", viaEdge: false });
  });
});
