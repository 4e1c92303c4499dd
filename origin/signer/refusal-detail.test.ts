import { describe, expect, it } from "vitest";
import {
  KEY_REFUSAL_DETAILS,
  type RefusalDetail,
  TRANSFER_REFUSAL_DETAILS,
} from "../../shared/enclave-protocol.ts";
import { refusalDetailAmong } from "./refusal-detail.ts";

describe("refusalDetailAmong", () => {
  const among = [...KEY_REFUSAL_DETAILS, ...TRANSFER_REFUSAL_DETAILS];
  const cases: Array<[name: string, detail: RefusalDetail | undefined, read: RefusalDetail | undefined]> = [
    ["a detail of the op's groups", "daily", "daily"],
    ["the key's detail", "key_binding", "key_binding"],
    ["another group's detail", "faucet_cooldown", undefined],
    ["no detail", undefined, undefined],
  ];
  for (const [name, detail, read] of cases) {
    it(`${name} reads as ${read ?? "none"}`, () => {
      expect(refusalDetailAmong(detail === undefined ? {} : { detail }, among)).toBe(read);
    });
  }
});
