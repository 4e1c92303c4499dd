import { describe, expect, it } from "vitest";
import { demoUrlOf } from "./discovery.ts";

// The demo's URL as discovery lists it: the discovery request's own public URL (resource-url.ts
// gives it by the same three rules as the demo's quote), with the demo's path.
describe("demoUrlOf", () => {
  it.each([
    [
      "https://pay.example/77/x402/facilitator/discovery/resources?limit=5",
      "https://pay.example/77/x402/demo",
    ],
    [
      "http://127.0.0.1:8787/77/x402/facilitator/discovery/search?query=a#x",
      "http://127.0.0.1:8787/77/x402/demo",
    ],
    [
      "https://pay.example/base/path/77/x402/facilitator/discovery/search",
      "https://pay.example/base/path/77/x402/demo",
    ],
  ])("%s → %s", (discovery, demo) => {
    expect(demoUrlOf(discovery)).toBe(demo);
  });
});
