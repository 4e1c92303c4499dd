import { describe, expect, it } from "vitest";
import { storeValues } from "./batch-store.ts";
import type { MoneyOperation, Stop } from "./operation.ts";

// What the store statement is told of the operations a batch did not sign: `failures` end their
// actions `failed` (final for the key), `notes` leave them `requested` with why (a retry with the
// key runs them again), `holds` store them `held`.

const operation = (actionId: string) => ({ actionId }) as MoneyOperation;
const NOW = new Date("2026-11-26T12:00:00.000Z");

describe("storeValues", () => {
  it("notes a check's not now, as the outbox's own could-not-sign, and ends only refusals", () => {
    const refused: Array<{ id: string; refusal: Stop }> = [
      { id: "refused", refusal: { code: "funding_gate_closed", message: "closed", fields: { reason: "x" } } },
      { id: "not-now", refusal: { notNow: { code: "chain_unavailable", message: "no balance" } } },
      { id: "held", refusal: { held: { rule: "approval_above_units", holdSeconds: 60 } } },
    ];
    const values = storeValues({
      refused: refused.map(({ id, refusal }) => ({ item: operation(id), id, refusal })),
      unavailable: [
        {
          item: operation("signer-down"),
          id: "signer-down",
          refusal: { code: "agent_signer_unavailable", message: "down" },
        },
      ],
      now: NOW,
    });
    const ids = (json: unknown) =>
      (JSON.parse(json as string) as Array<{ action_id: string; code?: string }>).map(
        (row) => `${row.action_id}${row.code ? `:${row.code}` : ""}`,
      );
    // Mutation: storing a not now among the failures ends the action `failed`, final for its key.
    expect(ids(values.failures)).toEqual(["refused:funding_gate_closed"]);
    expect(ids(values.notes)).toEqual(["signer-down:agent_signer_unavailable", "not-now:chain_unavailable"]);
    expect(ids(values.holds)).toEqual(["held"]);
  });
});
