import { randomBytes } from "node:crypto";
import type { AddressInfo, Socket } from "node:net";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import { errorBody } from "./errors.ts";
import type { AppEnv } from "./http/env.ts";

export type RunningServer = {
  url: string;
  port: number;
  /** Stops accepting, lets in-flight requests finish (up to `drainMs`), then closes the rest. */
  close(drainMs?: number): Promise<void>;
};

export function startHttpServer(app: Hono<AppEnv>, host: string, port: number): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info: AddressInfo) => {
      const url = `http://${host.includes(":") ? `[${host}]` : host}:${info.port}`;
      resolve({
        url,
        port: info.port,
        close(drainMs = 10_000) {
          return new Promise((done) => {
            const force = setTimeout(() => {
              if ("closeAllConnections" in server) server.closeAllConnections();
            }, drainMs);
            server.close(() => {
              clearTimeout(force);
              done();
            });
            // Idle keep-alive sockets would otherwise hold close() open until they time out.
            if ("closeIdleConnections" in server) server.closeIdleConnections();
          });
        },
      });
    });
    server.on("clientError", answerClientError);
    server.once("error", reject);
  });
}

/**
 * What Node's HTTP parser refuses before any route runs: headers over its limit (16 KiB, 431)
 * and bytes that are no HTTP request (400). Node's own answer has no body; this one is the error
 * envelope every other refusal uses, and the connection is closed since its framing is lost.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  // A reset has no one to answer; a request already being answered keeps its own response.
  if (
    error.code === "ECONNRESET" ||
    !socket.writable ||
    (socket as Socket & { _httpMessage?: unknown })._httpMessage
  ) {
    socket.destroy();
    return;
  }
  const tooLarge = error.code === "HPE_HEADER_OVERFLOW";
  const status = tooLarge ? 431 : 400;
  const body = JSON.stringify(
    tooLarge
      ? errorBody("headers_too_large", "the request headers are too large", requestId())
      : errorBody("validation_failed", "the request is not valid HTTP", requestId()),
  );
  socket.end(
    `HTTP/1.1 ${status} ${tooLarge ? "Request Header Fields Too Large" : "Bad Request"}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  );
}

const requestId = (): string => `req_${randomBytes(8).toString("hex")}`;
