import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ServiceUnavailable, UnexpectedAnswer } from "../client/index.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";

// `agent-wallet` when what answers at the base URL is not the gateway: a proxy's or captive
// portal's page, another service's JSON. The bin in its own process, as an agent runs it, against a
// loopback server that answers every request with that body (the gateway never does, so the server
// stands in for what is in front of it).

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;
const STACK_LINE = /\bat .*\.(mjs|ts):\d+/;

/** A server answering every request `status` with `body` of `type`. */
const answering = (status: number, type: string, body: string) =>
  startLoopbackServer(async (_request, response) => {
    response.writeHead(status, { "content-type": type }).end(body);
  });

const COMMANDS = [
  ["network"],
  ["balance"],
  ["faucet"],
  ["transfer", "--to", "0x1111111111111111111111111111111111111111", "--amount", "1"],
  ["action", "a1"],
  ["policy"],
  ["policy", "check", "--to", "0x1111111111111111111111111111111111111111", "--amount", "1"],
  ["rotate-token"],
  ["register"],
];

describe("agent-wallet against an answer that is not the gateway's", () => {
  const run = (base: string, args: string[]) =>
    runTool(BIN, args, {
      env: { AGENT_BASE_URL: `${base}/77`, AGENT_TOKEN: TOKEN },
      cleanEnv: true,
      timeoutMs: 60_000,
    });

  // Mutation: without the client's answer shapes, each command's human output reads a field the
  // body lacks: a TypeError's stack on stderr and exit 1 (faucet, transfer and action print
  // `action undefined: undefined undefined` and exit 0).
  it("a 200 of JSON without the fields: UnexpectedAnswer, exit 27, one line naming it, no stack, for every command", async () => {
    const gateway = await answering(200, "application/json", '{"ok":true}');
    try {
      for (const args of COMMANDS) {
        const human = await run(gateway.url, args);
        expect(human.code, `${args.join(" ")}: ${human.stderr}`).toBe(UnexpectedAnswer.exitCode);
        expect(human.stdout, args.join(" ")).toBe("");
        expect(human.stderr, args.join(" ")).toMatch(
          /^agent-wallet: UnexpectedAnswer \[unexpected_answer\]: (GET|POST) http:\/\/127\.0\.0\.1:\d+\/77\/agent\/v1\/\S+ answered 200 with JSON that is not (a|an|the) [^:]+: not the gateway's answer; is the base URL the gateway's \(chain segment included\)\?\n/,
        );
        expect(human.stderr, args.join(" ")).not.toMatch(STACK_LINE);
      }
    } finally {
      await gateway.close();
    }
  }, 180_000);

  it("a proxy's HTML page as a 200, or as a 403, is UnexpectedAnswer (27); a 502 page stays ServiceUnavailable (19), a retry may pass", async () => {
    const page = "<html><body>Please sign in to the network</body></html>";
    const portal = await answering(200, "text/html", page);
    const forbidden = await answering(403, "text/html", page);
    const badGateway = await answering(502, "text/html", page);
    try {
      // A money request: the key comes with it, and the advice fits an answer that is not the gateway's.
      const faucet = await run(portal.url, ["faucet", "--json"]);
      expect(faucet.code, faucet.stderr).toBe(UnexpectedAnswer.exitCode);
      const { error } = JSON.parse(faucet.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({
        name: "UnexpectedAnswer",
        code: "unexpected_answer",
        status: 200,
        exit_code: UnexpectedAnswer.exitCode,
      });
      expect(error.message).toMatch(/answered 200 with no JSON \(text\/html\)/);
      expect(error.idempotency_key).toMatch(/^faucet-/);

      const human = await run(portal.url, ["faucet"]);
      expect(human.stderr).toMatch(
        /\nidempotency key (faucet-\S+): the request may have reached the service; once the base URL answers as the gateway, run the same command with --key \1 to learn what it came to \(never a second payment\)\n$/,
      );

      const refused = await run(forbidden.url, ["balance", "--json"]);
      expect(refused.code, refused.stderr).toBe(UnexpectedAnswer.exitCode);
      expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: "unexpected_answer", status: 403 } });

      const outage = await run(badGateway.url, ["balance", "--json"]);
      expect(outage.code, outage.stderr).toBe(ServiceUnavailable.exitCode);
      expect(JSON.parse(outage.stdout)).toMatchObject({ error: { name: "ServiceUnavailable", status: 502 } });
      for (const { stdout, stderr } of [faucet, human, refused, outage]) {
        expect(stderr).not.toMatch(STACK_LINE);
        expect(`${stdout}${stderr}`).not.toContain(TOKEN);
      }
    } finally {
      await Promise.all([portal.close(), forbidden.close(), badGateway.close()]);
    }
  }, 120_000);

  // Mutation: without register()'s check, the solver's RangeError escapes: its stack on stderr,
  // exit 1, and nothing on stdout under --json.
  it("register asked for a proof of work past what any gateway asks (99 bits): UnexpectedAnswer (27), nothing solved, no stack", async () => {
    const gateway = await answering(
      428,
      "application/json",
      JSON.stringify({
        error: {
          code: "registration_proof_required",
          message: "solve it",
          request_id: "r",
          challenge: "c",
          bits: 99,
        },
      }),
    );
    try {
      const json = await run(gateway.url, ["register", "--json"]);
      expect(json.code, json.stderr).toBe(UnexpectedAnswer.exitCode);
      const { error } = JSON.parse(json.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ name: "UnexpectedAnswer", code: "unexpected_answer", status: 428 });
      expect(error.message).toMatch(
        /asks for 99 bits, where the gateway asks for 0 to 32: not the gateway's answer; nothing was created/,
      );
      expect(json.stderr).not.toMatch(STACK_LINE);
    } finally {
      await gateway.close();
    }
  }, 60_000);

  it("watch answered 200 with a page, not an event stream: UnexpectedAnswer (27), one line naming it, no stack", async () => {
    const portal = await answering(
      200,
      "text/html",
      "<html><body>Please sign in to the network</body></html>",
    );
    try {
      const human = await run(portal.url, ["watch"]);
      expect(human.code, human.stderr).toBe(UnexpectedAnswer.exitCode);
      expect(human.stdout).toBe("");
      expect(human.stderr).toMatch(
        /^agent-wallet: UnexpectedAnswer \[unexpected_answer\]: the event stream answered 200 with text\/html: not the gateway's answer; is the base URL the gateway's \(chain segment included\)\?\n$/,
      );
      expect(human.stderr).not.toMatch(STACK_LINE);
    } finally {
      await portal.close();
    }
  }, 60_000);

  // Mutation: without the check, the human line's BigInt(amount) throws: a SyntaxError's stack on
  // stderr and exit 1, the stream left behind.
  it("watch given an action event whose amount is not a decimal string: UnexpectedAnswer, exit 27, one line naming it, no stack", async () => {
    const event = {
      id: "7",
      type: "action.confirmed",
      occurred_at: "2026-01-01T00:00:00.000Z",
      data: { action_id: "a1", kind: "transfer", status: "confirmed", amount: "2.5", to: null },
    };
    const gateway = await startLoopbackServer(async (_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(`id: 7\nevent: action.confirmed\ndata: ${JSON.stringify(event)}\n\n`);
      // Held open, as a stream is: the CLI ends it.
    });
    try {
      const human = await run(gateway.url, ["watch"]);
      expect(human.code, human.stderr).toBe(UnexpectedAnswer.exitCode);
      expect(human.stdout).toBe("");
      expect(human.stderr).toMatch(
        /^agent-wallet: UnexpectedAnswer \[unexpected_answer\]: the event stream sent event 7 \(action\.confirmed\) whose amount is not a decimal string of units: not the gateway's answer; is the base URL the gateway's \(chain segment included\)\?\n$/,
      );
      expect(human.stderr).not.toMatch(STACK_LINE);
    } finally {
      await gateway.close();
    }
  }, 120_000);

  it("--help lists exit 27", async () => {
    const help = await runTool(BIN, ["--help"], { cleanEnv: true, timeoutMs: 60_000 });
    expect(help.stdout).toContain(`${UnexpectedAnswer.exitCode}  UnexpectedAnswer: unexpected_answer`);
  }, 60_000);
});
