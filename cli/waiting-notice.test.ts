import { describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { withWaitingNotice } from "./waiting-notice.ts";

describe("withWaitingNotice", () => {
  // The service itself cannot be made slow from here on demand: a fetch that answers after 100 ms
  // stands in for it; the notice is due after 20 ms.
  const slowFetch = async (): Promise<Response> => {
    await sleep(100);
    return new Response("{}");
  };

  it("says once that a request waits, and nothing for a read that asks to be held (?wait=)", async () => {
    const lines: string[] = [];
    const fetchFn = withWaitingNotice(slowFetch, { write: (text) => lines.push(text), afterMs: 20 });
    // Mutation: without the ?wait= exception, the held read prints the notice and fails this.
    await fetchFn("http://127.0.0.1:1/77/agent/v1/actions/a?wait=25");
    expect(lines).toEqual([]);
    await fetchFn("http://127.0.0.1:1/77/agent/v1/actions/a?wait=0");
    expect(lines).toEqual([
      "agent-wallet: no answer yet from GET http://127.0.0.1:1/77/agent/v1/actions/a after 0 s; still waiting\n",
    ]);
  });
});
