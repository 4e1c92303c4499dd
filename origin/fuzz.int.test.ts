import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FuzzStack, startFuzzStack } from "../scripts/test/fuzz/fuzz-stack.ts";
import { fuzzRoutes } from "../scripts/test/fuzz/routes.ts";
import { fuzzRoute, fuzzSettings } from "../scripts/test/fuzz/run.ts";

// Issue 18 item 1: every JSON route and every header the origin parses, fuzzed against the real
// origin process (Postgres, enclave, devnet real). Each property prints its seed and case count;
// see scripts/test/fuzz/run.ts (and the README's testing section) for a longer or replayed run.
const settings = fuzzSettings();

describe("fuzzing the origin's routes", () => {
  let stack: FuzzStack;
  beforeAll(async () => {
    stack = await startFuzzStack();
  }, 180_000);
  afterAll(async () => {
    await stack?.close();
  });

  // Ordered as declared: the console's write routes last, since their successes change settings
  // and identities the other routes run under.
  const names = fuzzRoutes({ agentIds: [] }).map((route) => route.name);
  for (const name of names) {
    it.skipIf(settings.only !== undefined && settings.only !== name)(
      `${name}: no 5xx, refusals in the spec's format, no state change from a refusal, the origin still answers`,
      async () => {
        const route = fuzzRoutes({ agentIds: [...stack.agents, stack.readOnly].map((a) => a.agentId) }).find(
          (candidate) => candidate.name === name,
        )!;
        const outcome = await fuzzRoute(stack, route, settings);
        expect(outcome.cases).toBe(settings.runs);
      },
      600_000,
    );
  }
});
