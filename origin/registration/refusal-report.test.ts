import { describe, expect, it } from "vitest";
import type { IssuanceRefusal } from "./issuance.ts";
import { type NodeRefusal, nodeRefusalOf } from "./refusal-report.ts";

// Which refusals are the node's state, reported as registration.at_reserve or .at_quota
// (docs/events.md#registration-events), and which are not.
describe("nodeRefusalOf", () => {
  const cases: Array<[IssuanceRefusal, NodeRefusal | undefined]> = [
    [{ code: "unavailable", reason: "key_reserve" }, "key_reserve"],
    [{ code: "unavailable", reason: "total_ceiling" }, "total_ceiling"],
    [{ code: "limited", limit: "network_daily" }, "network_daily"],
    // Paused has its own event, written when the setting changes.
    [{ code: "unavailable", reason: "paused" }, undefined],
    // A group's quota is a client's limit, not the node's.
    [{ code: "limited", limit: "per_ip_daily" }, undefined],
    [{ code: "unavailable", reason: "unavailable" }, undefined],
    [{ code: "proof_spent" }, undefined],
  ];
  it.each(cases)("%j is %s", (refusal, expected) => {
    expect(nodeRefusalOf(refusal)).toBe(expected);
  });
});
