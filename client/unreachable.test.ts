import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { nodeFetch } from "../cli/node-fetch.ts";
import { sleep } from "../shared/sleep.ts";
import { answerCutAfterHeaders } from "../testing/cut-body.ts";
import { freePort } from "../testing/free-port.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { AgentAuthFailed, createGatewayClient, type FetchLike, ServiceUnavailable } from "./index.ts";

// A gateway the client cannot reach: what its error tells the agent (the CLI prints it, the MCP
// server returns it). A loopback port nothing listens on, so the connection is refused for real,
// through Node's fetch and the CLI's node:http one.

const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;

describe("no answer from the gateway", () => {
  // Mutation: the error's message without the cause's code ("no answer from GET
  // /agent/v1/balance") says nothing of where it went or why, a wrong port like a service down.
  it.each([
    ["fetch", globalThis.fetch.bind(globalThis) as FetchLike],
    ["the CLI's node:http fetch", nodeFetch],
  ])("names where it went and the network's code (%s)", async (_, fetch) => {
    const port = await freePort();
    const wallet = createGatewayClient({ baseUrl: `http://127.0.0.1:${port}/77`, token: TOKEN, fetch });
    const error = await rejection(wallet.balance());
    expect(error).toBeInstanceOf(ServiceUnavailable);
    expect(error).toMatchObject({ code: "gateway_unreachable" });
    expect((error as Error).message).toBe(
      `no answer from GET http://127.0.0.1:${port}/77/agent/v1/balance (ECONNREFUSED)`,
    );
  });

  // Mutation: without bearerHeader's check, fetch refuses the header as a network failure:
  // ServiceUnavailable gateway_unreachable, whose advice is to retry, and its cause quotes the token.
  it.each([
    ["fetch", globalThis.fetch.bind(globalThis) as FetchLike],
    ["the CLI's node:http fetch", nodeFetch],
  ])(
    "a token no header can carry is AgentAuthFailed, sent nowhere and named nowhere, nor in the cause an agent's framework prints (%s)",
    async (_, fetch) => {
      let requests = 0;
      const gateway = await startLoopbackServer(async (_request, response) => {
        requests++;
        response.end("{}");
      });
      try {
        // A line break inside the token: fetch refuses it quoting the header's value.
        const wallet = createGatewayClient({ baseUrl: `${gateway.url}/77`, token: `${TOKEN}\nx`, fetch });
        const error = await rejection(wallet.balance());
        expect(error).toBeInstanceOf(AgentAuthFailed);
        expect(error).toMatchObject({ code: "token_malformed" });
        expect(inspect(error)).not.toContain(TOKEN);
        // The event stream too: it took fetch's refusal for no answer and reconnected for ever, silent.
        // (It throws before any request; the 5 s only bounds the failure, the stream then stopped.)
        const stop = new AbortController();
        const first = wallet.events({ signal: stop.signal })[Symbol.asyncIterator]().next();
        const outcome = await Promise.race([
          first.then(
            () => "an event",
            (caught: unknown) => caught,
          ),
          sleep(5_000).then(() => "still reconnecting after 5 s"),
        ]);
        stop.abort();
        expect(outcome).toBeInstanceOf(AgentAuthFailed);
        expect(requests).toBe(0);
      } finally {
        await gateway.close();
      }
    },
  );

  // Mutation: keeping fetch's own error as the cause prints the password with the error
  // (`Request cannot be constructed from a URL that includes credentials: http://agent:…@…`).
  it("never names the base URL's password, which fetch refuses quoting the URL", async () => {
    const port = await freePort();
    const password = "pw-4f1c9e7b2d";
    const wallet = createGatewayClient({
      baseUrl: `http://agent:${password}@127.0.0.1:${port}/77`,
      token: TOKEN,
    });
    const error = await rejection(wallet.balance());
    expect(error).toMatchObject({ code: "gateway_unreachable" });
    expect((error as Error).message).toBe(`no answer from GET http://127.0.0.1:${port}/77/agent/v1/balance`);
    expect(inspect(error)).not.toContain(password);
  });

  // The cause stays when it quotes nothing secret: it tells a refused port from a DNS failure.
  it("keeps a network failure's own cause, which quotes no secret", async () => {
    const port = await freePort();
    const wallet = createGatewayClient({ baseUrl: `http://127.0.0.1:${port}/77`, token: TOKEN });
    const error = await rejection(wallet.balance());
    expect(inspect(error)).toContain("ECONNREFUSED");
    expect(inspect(error)).not.toContain("withheld");
  });

  // Mutation: without callJson's catch around the body's read, fetch's answer throws its raw
  // TypeError ("terminated"), no GatewayError: the CLI crashed and the MCP server failed the call.
  it.each([
    ["fetch", globalThis.fetch.bind(globalThis) as FetchLike],
    ["the CLI's node:http fetch", nodeFetch],
  ])("an answer cut off after its headers is ServiceUnavailable, naming the cut (%s)", async (_, fetch) => {
    const gateway = await startLoopbackServer(async (_request, response) => {
      answerCutAfterHeaders(response, 200, { "content-type": "application/json" }, '{"balance":');
    });
    try {
      const wallet = createGatewayClient({ baseUrl: `${gateway.url}/77`, token: TOKEN, fetch });
      const error = await rejection(wallet.balance());
      expect(error).toBeInstanceOf(ServiceUnavailable);
      expect(error).toMatchObject({ code: "gateway_answer_lost", status: 200 });
      expect((error as Error).message).toMatch(
        new RegExp(
          `^the answer of GET ${gateway.url}/77/agent/v1/balance was cut off after its headers \\(status 200\\) \\((UND_ERR_SOCKET|ECONNRESET)\\)$`,
        ),
      );
    } finally {
      await gateway.close();
    }
  });
});
