/**
 * For a test file of the edge's Miniflare suite: the real worker in front of an origin stand-in
 * that answers every request with one settable answer. Both start before the file's tests and stop
 * after them; before each test the stand-in forgets what it received and answers `initial` again.
 */
import { afterAll, beforeAll, beforeEach } from "vitest";
import { type EdgeHandle, startTestEdge } from "../../testing/edge.ts";
import { type OriginStandIn, startOriginStandIn } from "./origin-stand-in.ts";

export type OriginAnswer = { status: number; headers: Record<string, string>; body: string };

export type AnsweringOrigin = {
  /** Set in beforeAll: read them inside tests only. */
  readonly origin: OriginStandIn;
  readonly edge: EdgeHandle;
  /** What the stand-in answers from now on, until the next test. */
  answer(next: OriginAnswer): void;
};

export function useEdgeBeforeAnsweringOrigin(initial: OriginAnswer): AnsweringOrigin {
  let origin: OriginStandIn | undefined;
  let edge: EdgeHandle | undefined;
  let current = initial;
  beforeAll(async () => {
    origin = await startOriginStandIn((_request, response) => {
      response.writeHead(current.status, current.headers).end(current.body);
    });
    edge = await startTestEdge({ originUrl: origin.url });
  });
  afterAll(async () => {
    await edge?.stop();
    await origin?.close();
  });
  beforeEach(() => {
    if (origin) origin.received.length = 0;
    current = initial;
  });
  return {
    get origin() {
      if (!origin) throw new Error("the origin stand-in starts in beforeAll");
      return origin;
    },
    get edge() {
      if (!edge) throw new Error("the edge starts in beforeAll");
      return edge;
    },
    answer(next) {
      current = next;
    },
  };
}
