/**
 * Bodies and headers over a limit, sent so that a test can tell whether the server answered
 * before reading them: a huge declared length of which almost nothing is sent, an endless chunked
 * body, and a header block over Node's limit. Raw sockets, since an HTTP client would wait to
 * send what it declared.
 */
import { request } from "node:http";
import { connect } from "node:net";
import { responseCheckEnabled, sharedResponseChecker } from "./openapi-check.ts";

export type RawAnswer = { status: number; body: unknown; sentBodyBytes: number };

/** Sends the head of a request (any headers, including a declared length) and `body`, then waits for an answer. */
export function sendRaw(
  url: string,
  params: { method: string; headers: Record<string, string>; body?: string },
): Promise<RawAnswer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(target.port), target.hostname);
    const head =
      `${params.method} ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n` +
      Object.entries(params.headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join("") +
      "\r\n";
    let received = "";
    socket.on("connect", () => socket.write(head + (params.body ?? "")));
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("utf8");
      const split = received.indexOf("\r\n\r\n");
      if (split < 0) return;
      const length = /content-length: *(\d+)/i.exec(received.slice(0, split))?.[1];
      if (length !== undefined && Buffer.byteLength(received.slice(split + 4)) >= Number(length)) {
        socket.destroy();
        const text = received.slice(split + 4, split + 4 + Number(length));
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {}
        const status = Number(received.slice(9, 12));
        const contentType = /content-type: *([^\r\n]+)/i.exec(received.slice(0, split))?.[1];
        const problem = documentProblem(params.method, url, status, contentType, body);
        if (problem) reject(new Error(problem));
        else resolve({ status, body, sentBodyBytes: Buffer.byteLength(params.body ?? "") });
      }
    });
    socket.on("error", reject);
    socket.setTimeout(30_000, () => {
      socket.destroy();
      reject(new Error(`no answer in 30 s; got ${JSON.stringify(received.slice(0, 200))}`));
    });
  });
}

export type EndlessOutcome =
  | { kind: "answered"; status: number; body: unknown; sent: number }
  | { kind: "closed"; sent: number };

/**
 * Streams a chunked body that never ends (1 KiB a millisecond, up to `giveUpBytes`) and reports
 * the answer, or the connection closed under the writer, and how much had been sent by then.
 */
export function sendEndlessBody(
  url: string,
  params: { headers: Record<string, string>; giveUpBytes?: number },
): Promise<EndlessOutcome> {
  const giveUp = params.giveUpBytes ?? 64 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    let sent = 0;
    const req = request(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...params.headers, "transfer-encoding": "chunked" },
      agent: false,
    });
    const chunk = Buffer.from(`{"pad":"${"x".repeat(1_000)}",`);
    const pump = setInterval(() => {
      if (sent > giveUp) {
        clearInterval(pump);
        req.destroy();
        reject(new Error(`${giveUp} bytes sent and no answer: the body is being buffered`));
        return;
      }
      req.write(chunk);
      sent += chunk.length;
    }, 1);
    req.on("response", (res) => {
      clearInterval(pump);
      const parts: Buffer[] = [];
      res.on("data", (part: Buffer) => parts.push(part));
      res.on("end", () => {
        req.destroy();
        const text = Buffer.concat(parts).toString("utf8");
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {}
        const status = res.statusCode ?? 0;
        const problem = documentProblem("POST", url, status, res.headers["content-type"], body);
        if (problem) reject(new Error(problem));
        else resolve({ kind: "answered", status, body, sent });
      });
    });
    req.on("error", (error: NodeJS.ErrnoException) => {
      clearInterval(pump);
      if (error.code === "EPIPE" || error.code === "ECONNRESET") resolve({ kind: "closed", sent });
      else reject(error);
    });
  });
}

/**
 * These refusals are answers too: checked against the OpenAPI document like every `send`
 * (testing/http.ts; OPENAPI_RESPONSE_CHECK=0 turns it off).
 */
function documentProblem(
  method: string,
  url: string,
  status: number,
  contentType: string | undefined,
  body: unknown,
): string | null {
  if (!responseCheckEnabled()) return null;
  const problems = sharedResponseChecker().check({ method, url, status, contentType, body });
  return problems.length === 0
    ? null
    : `the answer does not match the OpenAPI document:\n  ${problems.join("\n  ")}`;
}
