/**
 * The local edge (dev/edge.ts) as the suite starts it: every line the worker and its local front
 * log also goes to the run's secret scan (secret-sink.ts), whatever the test does with the lines,
 * so a secret or an agent token the edge logs fails the run.
 */
import { type EdgeHandle, type StartEdgeParams, startEdge } from "../dev/edge.ts";
import type { MoneyStack } from "./money-stack.ts";
import { recordOutput } from "./secret-sink.ts";
import { type FixtureOptions, useFixture } from "./stack.ts";

export type { EdgeHandle };

export function startTestEdge(params: StartEdgeParams): Promise<EdgeHandle> {
  const given = params.outputSink;
  return startEdge({
    ...params,
    outputSink: (line) => {
      recordOutput("edge", line);
      given?.(line);
    },
  });
}

/**
 * An edge in front of `stack`'s own origin for the describe block it is called in (stack.ts
 * useFixture: started after the stack, stopped before it), its lines kept from the test's output.
 * `options` go to the edge as they are (`directSocket`, say).
 */
export function useStackEdge(
  stack: MoneyStack,
  edgeSharedSecret: string,
  options: Omit<StartEdgeParams, "originUrl" | "edgeSharedSecret"> = {},
  fixture: FixtureOptions = { timeoutMs: 180_000 },
): EdgeHandle {
  return useFixture(
    "edge",
    () => startTestEdge({ originUrl: stack.origin.url, edgeSharedSecret, onLine: () => {}, ...options }),
    (edge) => edge.stop(),
    fixture,
  );
}
