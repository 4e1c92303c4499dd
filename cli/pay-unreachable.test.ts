import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { PaymentRefused, ServiceUnavailable, ValidationFailed } from "../client/index.ts";
import { answerCutAfterHeaders } from "../testing/cut-body.ts";
import { freePort } from "../testing/free-port.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";

// `agent-wallet pay URL` when the resource cannot be asked at all, or answers a 402 whose quote
// cannot be read: nothing was paid, and the command says so as any other error (its class's exit
// code, one JSON document under --json), never a crash with a stack trace. The bin in its own
// process, as an agent runs it, against a loopback port nothing listens on (the connection is
// refused for real) or a loopback server answering as such a resource would. The gateway is never
// reached, so none is started (its base URL is a port nothing listens on either).

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;

describe("agent-wallet pay, the resource unreachable, not a URL, or its quote unreadable", () => {
  const pay = async (url: string, json: boolean) => {
    const port = await freePort();
    return runTool(BIN, ["pay", url, ...(json ? ["--json"] : [])], {
      env: { AGENT_BASE_URL: `http://127.0.0.1:${port}/77`, AGENT_TOKEN: TOKEN },
      cleanEnv: true,
      timeoutMs: 60_000,
    });
  };

  // Mutation: without the CLI's handling, both runs exit 1 with a TypeError's stack on stderr and
  // nothing on stdout.
  it("a refused connection is ServiceUnavailable (exit 19): nothing paid, the same command may run again", async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/paid?secret=q`;
    const json = await pay(url, true);
    expect(json.code).toBe(ServiceUnavailable.exitCode);
    const { error } = JSON.parse(json.stdout) as { error: Record<string, unknown> };
    expect(error).toMatchObject({
      name: "ServiceUnavailable",
      code: "resource_unreachable",
      exit_code: ServiceUnavailable.exitCode,
    });
    // Where it went, without the query (which may carry a secret of the resource's).
    expect(error.message).toContain(`GET http://127.0.0.1:${port}/paid`);
    expect(error.message).toContain("nothing was paid");
    expect(json.stdout).not.toContain("secret=q");
    expect(json.stderr).not.toMatch(/\bat .*\.mjs:\d+/);

    const human = await pay(url, false);
    expect(human.code).toBe(ServiceUnavailable.exitCode);
    expect(human.stderr).toMatch(/^agent-wallet: ServiceUnavailable \[resource_unreachable\]: /);
    expect(human.stderr).not.toMatch(/\bat .*\.mjs:\d+/);
    expect(`${human.stdout}${human.stderr}${json.stdout}${json.stderr}`).not.toContain(TOKEN);
  }, 120_000);

  // Mutation: without paidAnswerText, the body's read throws its raw error: exit 1, a stack trace.
  it("a free answer cut off after its headers is ServiceUnavailable (exit 19): nothing paid, the same command may run again", async () => {
    const resource = await startLoopbackServer(async (_request, response) => {
      answerCutAfterHeaders(response, 200, { "content-type": "application/json" }, '{"free":');
    });
    try {
      const json = await pay(`${resource.url}/free`, true);
      expect(json.code, json.stderr).toBe(ServiceUnavailable.exitCode);
      const { error } = JSON.parse(json.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ name: "ServiceUnavailable", code: "resource_answer_lost", status: 200 });
      expect(error.message).toMatch(/cut off after its headers \(ECONNRESET\): nothing was paid/);
      expect(json.stderr).not.toMatch(/\bat .*\.mjs:\d+/);
    } finally {
      await resource.close();
    }
  }, 120_000);

  // Mutation: with readQuote's old ServiceUnavailable, each exits 19, the "run it again" code, for
  // a resource that answers every request the same.
  it("a 402 whose quote cannot be read is PaymentRefused quote_unreadable (exit 16): nothing paid, not a retry", async () => {
    const quotes = [
      ["text/html", "<html>Payment required</html>"],
      ["application/json", '{"x402Version":2,"error":"no accepts"}'],
      ["application/json", '{"x402Version":2,"accepts":[]}'],
      ["application/json", '{"x402Version":2,"accepts":["exact"]}'],
    ];
    let asked = 0;
    const resource = await startLoopbackServer(async (_request, response) => {
      const [type, body] = quotes[asked++ % quotes.length]!;
      // A header that is not Base64 of a quote either.
      response.writeHead(402, { "content-type": type, "payment-required": "not base64!" }).end(body);
    });
    try {
      for (const [, body] of quotes) {
        const json = await pay(`${resource.url}/paid`, true);
        expect(json.code, `${body}: ${json.stderr}`).toBe(PaymentRefused.exitCode);
        const { error } = JSON.parse(json.stdout) as { error: Record<string, unknown> };
        expect(error, body).toMatchObject({ name: "PaymentRefused", code: "quote_unreadable", status: 402 });
        expect(error.message).toMatch(
          /without a quote that can be read .*: nothing was paid; asked again, it answers the same$/,
        );
        expect(json.stderr).not.toMatch(/\bat .*\.mjs:\d+/);
      }
      const human = await pay(`${resource.url}/paid`, false);
      expect(human.code).toBe(PaymentRefused.exitCode);
      expect(human.stderr).toMatch(
        /^agent-wallet: PaymentRefused \[quote_unreadable\]: the resource answered 402 without a quote/,
      );
    } finally {
      await resource.close();
    }
  }, 120_000);

  // The other side of the one above: a 402 cut off on the way may hold its quote the next time.
  it("a 402 cut off after its headers is ServiceUnavailable resource_answer_lost (exit 19): nothing paid, the same command may run again", async () => {
    const resource = await startLoopbackServer(async (_request, response) => {
      answerCutAfterHeaders(response, 402, { "content-type": "application/json" }, '{"x402Version":2,"acc');
    });
    try {
      const json = await pay(`${resource.url}/paid`, true);
      expect(json.code, json.stderr).toBe(ServiceUnavailable.exitCode);
      const { error } = JSON.parse(json.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ name: "ServiceUnavailable", code: "resource_answer_lost", status: 402 });
      expect(error.message).toMatch(/cut off after its headers \(ECONNRESET\): nothing was paid/);
    } finally {
      await resource.close();
    }
  }, 120_000);

  // Mutation: without the CLI's check, node:http refuses the method as a network failure: exit 19,
  // ServiceUnavailable resource_unreachable, "the same command may run again".
  it("a --method that is not an HTTP method is ValidationFailed (exit 6), nothing sent", async () => {
    let asked = 0;
    const resource = await startLoopbackServer(async (_request, response) => {
      asked++;
      response.end("free");
    });
    try {
      for (const method of ["BAD METHOD", "GET\r\nX-Injected: 1", ""]) {
        const port = await freePort();
        const run = await runTool(BIN, ["pay", `${resource.url}/free`, "--json", `--method=${method}`], {
          env: { AGENT_BASE_URL: `http://127.0.0.1:${port}/77`, AGENT_TOKEN: TOKEN },
          cleanEnv: true,
          timeoutMs: 60_000,
        });
        expect(run.code, JSON.stringify(method)).toBe(ValidationFailed.exitCode);
        expect(JSON.parse(run.stdout)).toMatchObject({
          error: {
            name: "ValidationFailed",
            message: "--method must be an HTTP method, such as GET or POST",
          },
        });
      }
      expect(asked).toBe(0);
    } finally {
      await resource.close();
    }
  }, 120_000);

  it("a URL that is not one is ValidationFailed (exit 6)", async () => {
    const json = await pay("not-a-url", true);
    expect(json.code).toBe(ValidationFailed.exitCode);
    const { error } = JSON.parse(json.stdout) as { error: Record<string, unknown> };
    expect(error).toMatchObject({ name: "ValidationFailed", code: "validation_failed" });
    expect(error.message).toMatch(/pay needs an http or https URL/);
    const ftp = await pay("ftp://127.0.0.1/x", false);
    expect(ftp.code).toBe(ValidationFailed.exitCode);
    expect(ftp.stderr).toMatch(/ValidationFailed \[validation_failed\]: pay needs an http or https URL/);
  }, 120_000);
});
