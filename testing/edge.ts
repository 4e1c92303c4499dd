/**
 * The local edge (dev/edge.ts) as the suite starts it: every line the worker and its local front
 * log also goes to the run's secret scan (secret-sink.ts), whatever the test does with the lines,
 * so a secret or an agent token the edge logs fails the run.
 */
import { type EdgeHandle, type StartEdgeParams, startEdge } from "../dev/edge.ts";
import { recordOutput } from "./secret-sink.ts";

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
