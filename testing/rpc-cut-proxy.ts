/**
 * A JSON-RPC pass-through in front of the devnet whose line can be cut, for tests of a chain that
 * stops answering (a settlement broadcast whose receipt never comes in time). While cut,
 * every connection is dropped without an answer, as a network partition would; the devnet itself
 * keeps running and mining. `cutAfter(method)` cuts the line right after forwarding the answer of
 * the first request that calls `method`, an instant a test cannot hit from outside. `withhold(method)`
 * answers 503 to the requests that call `method` while it is set, and passes the rest (a node that
 * fails one kind of call). Loopback only.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { startLoopbackServer } from "./loopback-server.ts";

export type RpcCutProxy = {
  url: string;
  /** Requests that went through to the devnet (proof the client really used the proxy). */
  readonly forwarded: number;
  /** Cut the line now: open connections are dropped, new requests are dropped unanswered. */
  cut(): void;
  /** Cut the line once a request calling `method` has been answered; resolves when it is cut. */
  cutAfter(method: string): Promise<void>;
  /** Let requests through again. */
  restore(): void;
  /** Answer 503 to every request calling `method` (undefined: none), forwarding the others. */
  withhold(method: string | undefined): void;
  /** Requests answered 503 by `withhold`. */
  readonly withheld: number;
  /** Requests that called `method` (alone or in a batch), answered or not, since the proxy started. */
  calls(method: string): number;
  close(): Promise<void>;
};

export async function startRpcCutProxy(targetUrl: string): Promise<RpcCutProxy> {
  let isCut = false;
  let forwarded = 0;
  let withheldMethod: string | undefined;
  let withheld = 0;
  let trigger: { method: string; fire: () => void } | undefined;
  const called = new Map<string, number>();

  const cut = (): void => {
    isCut = true;
    server.dropConnections();
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (isCut) {
      request.socket.destroy();
      return;
    }
    const body = Buffer.concat(chunks).toString();
    for (const method of methodsOf(body)) called.set(method, (called.get(method) ?? 0) + 1);
    if (withheldMethod !== undefined && body.includes(`"${withheldMethod}"`)) {
      withheld++;
      response.writeHead(503).end();
      return;
    }
    const answer = await fetch(targetUrl, {
      method: "POST",
      headers: { "content-type": request.headers["content-type"] ?? "application/json" },
      body,
    });
    const text = await answer.text();
    if (isCut) {
      request.socket.destroy();
      return;
    }
    forwarded++;
    response.writeHead(answer.status, { "content-type": "application/json" });
    response.end(text);
    if (trigger && body.includes(`"${trigger.method}"`)) {
      const fire = trigger.fire;
      trigger = undefined;
      // After the answer is on its way: the client learns the chain accepted it, then loses the line.
      response.once("finish", () => {
        cut();
        fire();
      });
    }
  };

  const server = await startLoopbackServer(handle);

  return {
    url: server.url,
    get forwarded() {
      return forwarded;
    },
    get withheld() {
      return withheld;
    },
    calls: (method) => called.get(method) ?? 0,
    withhold: (method) => {
      withheldMethod = method;
    },
    cut,
    cutAfter: (method) =>
      new Promise<void>((resolve) => {
        trigger = { method, fire: resolve };
      }),
    restore: () => {
      isCut = false;
    },
    close: () => server.close(),
  };
}

/** The methods a JSON-RPC request or batch calls, each once; none for a body that is not one. */
function methodsOf(body: string): Set<string> {
  try {
    const parsed: unknown = JSON.parse(body);
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    return new Set(
      calls.flatMap((call) =>
        typeof call === "object" && call !== null && typeof (call as { method?: unknown }).method === "string"
          ? [(call as { method: string }).method]
          : [],
      ),
    );
  } catch {
    return new Set();
  }
}
