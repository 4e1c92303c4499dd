import type { ChildProcess } from "node:child_process";
import type { ServerResponse } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import { endsTooSoonToSettle } from "../origin/x402/settle-window.ts";
import { sleep } from "../shared/sleep.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { officialArticleSeller } from "../testing/x402-official-seller.ts";
import { authorizationUsedCount } from "../testing/x402-settlements.ts";

// `agent-wallet pay` stopped while its paid request waits, then run again as its waiting line says,
// against the real stack (origin, enclave, devnet, Postgres) and an official @x402/hono seller that
// settles through our facilitator. The node settles and signs for 12 s at most, and the seller
// quotes that: by the time the agent runs the command again, the authorization it presented can no
// longer pay.

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;
const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
/** The node's longest validity and the seller's quote: 6 s more than the facilitator's margin. */
const VALIDITY_SECONDS = 12;

describe("agent-wallet pay stopped while its payment is presented (real stack, official seller)", () => {
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo },
      policy: { x402MaxTimeoutSeconds: VALIDITY_SECONDS },
      env: { AGENT_X402_MAX_TIMEOUT_SECONDS: String(VALIDITY_SECONDS) },
    },
    { timeoutMs: 120_000 },
  );

  /**
   * The seller's way to the facilitator: every request passes to the real one; while `holding`, a
   * settle's answer is read whole and then held, never given to the seller (a fake stall of the
   * seller's link, named as such: the settlement on chain is real). `close` drops what it holds.
   */
  const startFacilitatorLink = async () => {
    const link = { holding: true, held: [] as ServerResponse[], heldValidBefore: [] as bigint[] };
    const upstream = `${stack.origin.base}/x402/facilitator`;
    const server = await startLoopbackServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const answer = await globalThis.fetch(`${upstream}${request.url}`, {
        method: request.method,
        headers: { "content-type": request.headers["content-type"] ?? "application/json" },
        ...(request.method === "GET" ? {} : { body: Buffer.concat(chunks) }),
      });
      const text = await answer.text();
      if (link.holding && request.url === "/settle") {
        const settle = JSON.parse(Buffer.concat(chunks).toString()) as {
          paymentPayload: { payload: { authorization: { validBefore: string } } };
        };
        link.heldValidBefore.push(BigInt(settle.paymentPayload.payload.authorization.validBefore));
        link.held.push(response);
        return;
      }
      response.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "" });
      response.end(text);
    });
    return { link, server };
  };

  /** An official seller of one article over HTTP (testing/x402-official-seller.ts). */
  const startSeller = async (facilitatorUrl: string) => {
    const app = officialArticleSeller({
      facilitator: new HTTPFacilitatorClient({ url: facilitatorUrl }),
      payTo,
      amount: AMOUNT,
      maxTimeoutSeconds: VALIDITY_SECONDS,
    });
    return startLoopbackServer(async (request, response) => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(request.headers)) {
        if (typeof value === "string") headers.set(name, value);
      }
      const answer = await app.fetch(
        new Request(`http://${request.headers.host}${request.url}`, { headers }),
      );
      const out: Record<string, string> = {};
      answer.headers.forEach((value, name) => {
        out[name] = value;
      });
      response.writeHead(answer.status, out);
      response.end(Buffer.from(await answer.arrayBuffer()));
    });
  };

  it("run again as its waiting line says, after the authorization it presented can no longer pay, pays nothing more and gets the article", async () => {
    // Mutation: a waiting line that says to run the same command again with no key (as it did)
    // makes the second run a new purchase once the first authorization has expired: a second
    // authorization, settled, the article paid twice.
    const { link, server: facilitator } = await startFacilitatorLink();
    const seller = await startSeller(facilitator.url);
    try {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const url = `${seller.url}/article`;
      const env = { AGENT_BASE_URL: stack.origin.base, AGENT_TOKEN: agent.token };
      let child: ChildProcess | undefined;
      let stderr = "";
      const first = await runTool(BIN, ["pay", url], {
        env,
        cleanEnv: true,
        timeoutMs: 60_000,
        onSpawn: (spawned) => {
          child = spawned;
        },
        onStderr: (text) => {
          stderr += text;
          // The agent stops the command (Ctrl-C) once it says the paid request waits.
          if (link.held.length > 0 && /no answer yet from GET .*\/article/.test(stderr))
            child?.kill("SIGINT");
        },
      });
      expect(first.code, stderr).toBe(-1);
      await expect
        .poll(() => authorizationUsedCount(stack.devnet.url, agent.wallet), { timeout: 30_000 })
        .toBe(1);
      const notice = stderr.split("\n").filter((line) => /no answer yet from GET .*\/article/.test(line));
      expect(notice).toHaveLength(1);

      // The authorization it presented is now too near its end for any facilitator to settle: its
      // end within the margin, by the rule the node and the facilitator both apply
      // (settle-window.ts), read on this machine's clock, which is theirs. (A fixed sleep of
      // VALIDITY_SECONDS did as much, about 8 s later.)
      const [validBefore] = link.heldValidBefore;
      const margin = BigInt(stack.origin.deps.config.x402.validityMarginSeconds);
      const nowSeconds = (): bigint => BigInt(Math.floor(Date.now() / 1000));
      expect(link.heldValidBefore).toHaveLength(1);
      while (!endsTooSoonToSettle(validBefore!, nowSeconds(), margin)) await sleep(100);
      link.holding = false;
      // What the line says to run: the same command, with the key it names if it names one.
      const key = /--key (\S+?):/.exec(notice[0]!)?.[1];
      const again = await runTool(BIN, ["pay", url, ...(key === undefined ? [] : ["--key", key])], {
        env,
        cleanEnv: true,
        timeoutMs: 60_000,
      });
      expect(
        await authorizationUsedCount(stack.devnet.url, agent.wallet),
        `the command the waiting line named (${notice[0]}) paid a second time`,
      ).toBe(1);
      expect(key).toMatch(/^x402-[0-9a-f]{64}$/);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain("paid for");
    } finally {
      for (const held of link.held) held.destroy();
      await seller.close();
      await facilitator.close();
    }
  }, 120_000);
});
