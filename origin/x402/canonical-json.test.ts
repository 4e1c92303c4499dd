import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson, sortedKeysJson } from "./canonical-json.ts";

// The expected strings are what the settler and x402 authorize produced before the two shared one
// module: a stored hash of either must be reproduced from the same value, byte for byte.

/** A requirement as a client sends it: keys in no particular order, one nested object. */
const requirement = {
  scheme: "exact",
  network: "eip155:77",
  asset: "0x0000000000000000000000000000000000000402",
  payTo: "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01",
  amount: "10000",
  maxTimeoutSeconds: 60,
  extra: { version: "2", name: "USD Coin" },
};
const requirementSorted =
  '{"amount":"10000","asset":"0x0000000000000000000000000000000000000402","extra":{"name":"USD Coin","version":"2"},' +
  '"maxTimeoutSeconds":60,"network":"eip155:77","payTo":"0xAbCdEf0123456789aBcDeF0123456789AbCdEf01","scheme":"exact"}';

/** Parsed from JSON: integer-like keys, a key before the digits, nested arrays, -0, a line separator. */
const mixed = JSON.parse('{"b":[{"z":1,"a":null},"é\\u2028"],"10":true,"2":-0,"A":1.5e-7,"$":{}}') as unknown;

describe("canonicalJson (the settler's requirement and payload hashes)", () => {
  it("sorts keys at every level: a requirement gives the string and the hash it always gave", () => {
    expect(canonicalJson(requirement)).toBe(requirementSorted);
    expect(createHash("sha256").update(canonicalJson(requirement)).digest("hex")).toBe(
      "6306918e064ec662b1dd0cd7f4d7f0551cf4fffac22e1e50823dc3c9b22eb25b",
    );
  });

  it("orders integer-like keys as strings, among the others", () => {
    expect(canonicalJson(mixed)).toBe('{"$":{},"10":true,"2":0,"A":1.5e-7,"b":[{"a":null,"z":1},"é\u2028"]}');
  });

  it("writes undefined as null, in an object, in an array and on its own", () => {
    expect(canonicalJson({ a: undefined, b: [undefined] })).toBe('{"a":null,"b":[null]}');
    expect(canonicalJson(undefined)).toBe("null");
  });
});

describe("sortedKeysJson (x402 authorize's request hashes stored before it hashed the parts as sent)", () => {
  it("sorts keys at every level: a requirement gives the string it always gave", () => {
    expect(sortedKeysJson(requirement)).toBe(requirementSorted);
  });

  it("keeps JSON.stringify's order for integer-like keys: first, in numeric order", () => {
    expect(sortedKeysJson(mixed)).toBe(
      '{"2":0,"10":true,"$":{},"A":1.5e-7,"b":[{"a":null,"z":1},"é\u2028"]}',
    );
  });

  it("leaves out a key whose value is undefined", () => {
    expect(sortedKeysJson({ a: undefined, b: [undefined] })).toBe('{"b":[null]}');
  });
});
