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

  it("reads the advice when the line is due, and says it once more only when it changed since", async () => {
    // Mutation: a line told once per command, whatever its advice, never gives `pay`'s key once
    // its payment is presented, after a slow authorization told the advice of before it.
    const lines: string[] = [];
    let advice = "nothing has been presented yet";
    const fetchFn = withWaitingNotice(slowFetch, {
      write: (text) => lines.push(text),
      advice: () => advice,
      afterMs: 20,
    });
    await fetchFn("http://127.0.0.1:1/77/agent/v1/x402/authorize");
    await fetchFn("http://127.0.0.1:1/77/agent/v1/x402/authorize");
    advice = "run the same command with --key K";
    await fetchFn("http://127.0.0.1:2/article");
    expect(lines).toEqual([
      "agent-wallet: no answer yet from GET http://127.0.0.1:1/77/agent/v1/x402/authorize after 0 s; still waiting (nothing has been presented yet)\n",
      "agent-wallet: no answer yet from GET http://127.0.0.1:2/article after 0 s; still waiting (run the same command with --key K)\n",
    ]);
  });
});
