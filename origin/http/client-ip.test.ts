import { describe, expect, it } from "vitest";
import { parseCidrList } from "./cidr.ts";
import { addressGroup, normalizeIp, resolveClientIp } from "./client-ip.ts";

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
});

describe("addressGroup", () => {
  it("keeps an IPv4 address as it is", () => {
    expect(addressGroup("203.0.113.5")).toBe("203.0.113.5");
  });

  it("groups IPv6 by /64, whatever the spelling", () => {
    expect(addressGroup("2001:db8:1:2::a")).toBe("2001:db8:1:2::/64");
    expect(addressGroup("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(addressGroup("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressGroup("::1")).toBe("0:0:0:0::/64");
    expect(addressGroup("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressGroup("64:ff9b:1:2::198.51.100.7")).toBe("64:ff9b:1:2::/64");
    expect(addressGroup("2001:db8:1:3::a")).not.toBe(addressGroup("2001:db8:1:2::a"));
  });
});
