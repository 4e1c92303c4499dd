/**
 * A request whose headers go out at once and whose body stops after its first bytes: the slow
 * client of a slow-body (slowloris) attack. The connection stays open, sending nothing more, until
 * the server answers or closes it, or the test cuts it.
 */
import { type ClientRequest, request } from "node:http";
import { recordOutput } from "./secret-sink.ts";

export type HalfSentAnswer =
  | { kind: "answered"; status: number; headers: Record<string, string | string[] | undefined>; body: string }
  /** The server closed the connection without an answer. */
  | { kind: "closed" };

export type HalfSentRequest = {
  /** Settles once the server has answered (or closed); records when, as Date.now(). */
  answer: Promise<HalfSentAnswer & { at: number }>;
  /** Resolves once the request's headers and first bytes are on the wire. */
  sent: Promise<void>;
  /** Cuts the connection, as a client that goes away does. */
  destroy(): void;
};

export type HalfSentParams = {
  method?: string;
  headers?: Record<string, string>;
  /** What is sent of the body before the silence; one byte by default. */
  firstBytes?: string;
  /**
   * The body's declared length (Content-Length), more than `firstBytes`; without it the body is
   * chunked and its first chunk is `firstBytes`.
   */
  declaredLength?: number;
  localAddress?: string;
};

export function sendHalfBody(url: string, params: HalfSentParams = {}): HalfSentRequest {
  const firstBytes = params.firstBytes ?? "{";
  let req: ClientRequest;
  const answer = new Promise<HalfSentAnswer & { at: number }>((resolve) => {
    req = request(url, {
      method: params.method ?? "POST",
      headers: {
        "content-type": "application/json",
        ...(params.declaredLength === undefined
          ? { "transfer-encoding": "chunked" }
          : { "content-length": String(params.declaredLength) }),
        ...params.headers,
      },
      localAddress: params.localAddress,
      agent: false,
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        if ((res.statusCode ?? 0) >= 400) recordOutput("error body", body);
        resolve({
          kind: "answered",
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          at: Date.now(),
        });
      });
      res.on("error", () => resolve({ kind: "closed", at: Date.now() }));
    });
    // A server that closes first, or the test's own destroy(): no answer.
    req.on("error", () => resolve({ kind: "closed", at: Date.now() }));
    req.on("close", () => resolve({ kind: "closed", at: Date.now() }));
  });
  const sent = new Promise<void>((resolve, reject) => {
    req.once("error", reject);
    req.write(firstBytes, () => resolve());
  });
  sent.catch(() => {});
  return { answer, sent, destroy: () => req.destroy() };
}
