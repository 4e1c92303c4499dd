import { randomBytes } from "node:crypto";
import type { Server, ServerResponse } from "node:http";
import { type AddressInfo, Server as NetServer, type Socket } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import type { Hono } from "hono";
import type { ErrorBody } from "../shared/error-codes.ts";
import { errorBody } from "./errors.ts";
import type { AppEnv } from "./http/env.ts";

export type RunningServer = {
  url: string;
  port: number;
  /**
   * Stops accepting and answers the requests already on its connections, each answer closing its
   * connection; after `drainMs` the connections still open are closed as they are.
   */
  close(drainMs?: number): Promise<void>;
};

/**
 * Serves `app` on `host:port`, or on `inheritedFd`: a listening socket handed over by a supervisor
 * (systemd socket activation, origin/socket-activation.ts). That socket must be bound to
 * `host:port` (port 0: any), since the start-up checks on ORIGIN_HOST (loopback-only switches,
 * the public-bind guard) judge the address the origin really serves. `receiveTimeouts` are
 * RECEIVE_TIMEOUTS but in tests of the timeouts themselves.
 */
export function startHttpServer(
  app: Hono<AppEnv>,
  host: string,
  port: number,
  inheritedFd?: number,
  receiveTimeouts: ReceiveTimeouts = RECEIVE_TIMEOUTS,
): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = createAdaptorServer({ fetch: app.fetch, serverOptions: receiveTimeouts }) as Server;
    const drain = drainOnClose(server);
    server.on("clientError", answerClientError);
    server.once("error", reject);
    const listening = (): void => {
      const info = server.address() as AddressInfo;
      if (inheritedFd !== undefined && !servesAddress(info, host, port)) {
        server.close();
        reject(
          new Error(
            `LISTEN_FDS: the inherited socket is bound to ${info.address}:${info.port}, ` +
              `not ORIGIN_HOST:ORIGIN_PORT ${host}:${port}`,
          ),
        );
        return;
      }
      const shown = inheritedFd === undefined ? host : info.address;
      resolve({
        url: `http://${shown.includes(":") ? `[${shown}]` : shown}:${info.port}`,
        port: info.port,
        close: (drainMs = 10_000) => drain.close(drainMs),
      });
    };
    if (inheritedFd === undefined) server.listen(port, host, listening);
    else server.listen({ fd: inheritedFd }, listening);
  });
}

/**
 * How long a client may take to send its request: Node's defaults (headers 60 s, the whole request
 * 300 s, checked every 30 s) let a client that trickles its bytes hold a connection and whatever
 * waits on it for minutes. Both bound receiving only: once a request is in, its answer may take as
 * long as it needs (the x402 demo waits up to AGENT_X402_RECEIPT_TIMEOUT_MS for a receipt). Routes
 * give a body BODY_DEADLINE_MS once they start reading it (http/read-body.ts); the whole-request
 * bound is the backstop for a body no route reads. Past either, Node stops reading and the client
 * gets 408 (answerClientError).
 */
export const RECEIVE_TIMEOUTS: ReceiveTimeouts = {
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  connectionsCheckingInterval: 1_000,
};

export type ReceiveTimeouts = {
  headersTimeout: number;
  requestTimeout: number;
  connectionsCheckingInterval: number;
};

function servesAddress(info: AddressInfo, host: string, port: number): boolean {
  const hostMatches =
    info.address === host || (host === "localhost" && ["127.0.0.1", "::1"].includes(info.address));
  return hostMatches && (port === 0 || info.port === port);
}

/**
 * How long a kept-alive connection idle at the drain's start may still bring a request: one its
 * client sent just before, and which is on its way. Closed at once, as Node's `server.close()`
 * closes idle connections, that request would be cut; it is answered instead. A connection still
 * idle after this is closed as Node's keep-alive timeout closes one, with the same race for a
 * request sent at that very moment, which HTTP/1.1 clients know.
 */
const IDLE_GRACE_MS = 250;

/**
 * The drain. The listener closes at once; every answer from then on says `Connection: close`, so
 * each connection ends after its current request, and a client that would go on sending on a
 * kept-alive connection cannot keep it open until the force at `drainMs` cuts a request short.
 * (An answer whose headers were already out keeps its connection for Node's keep-alive timeout.)
 */
function drainOnClose(server: Server): { close(drainMs: number): Promise<void> } {
  const inFlight = new Set<ServerResponse>();
  let draining = false;
  // Ahead of the app's listener, so the header is set before the app can write its answer.
  server.prependListener("request", (_req, res) => {
    if (draining) res.setHeader("connection", "close");
    inFlight.add(res);
    res.once("close", () => inFlight.delete(res));
  });
  return {
    close(drainMs) {
      draining = true;
      for (const res of inFlight) if (!res.headersSent) res.setHeader("connection", "close");
      return new Promise((done) => {
        const idle = setTimeout(() => server.closeIdleConnections(), IDLE_GRACE_MS);
        const force = setTimeout(() => server.closeAllConnections(), drainMs);
        // net.Server's close: http.Server's would also close the idle connections at once.
        NetServer.prototype.close.call(server, () => {
          clearTimeout(idle);
          clearTimeout(force);
          done();
        });
      });
    },
  };
}

/**
 * What Node's HTTP parser refuses before any route runs: headers over its limit (16 KiB, 431),
 * a request not received within RECEIVE_TIMEOUTS (408) and bytes that are no HTTP request (400).
 * Node's own answer has no body; this one is the error envelope every other refusal uses, and the
 * connection is closed since its framing is lost.
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
  const [status, reason, body] = clientErrorAnswer(error.code);
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n` +
      `Connection: close\r\n\r\n${text}`,
  );
}

function clientErrorAnswer(code: string | undefined): [number, string, ErrorBody] {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return [
        431,
        "Request Header Fields Too Large",
        errorBody("headers_too_large", "the request headers are too large", requestId()),
      ];
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return [
        408,
        "Request Timeout",
        errorBody("request_timeout", "the request did not arrive in full in time", requestId()),
      ];
    default:
      return [
        400,
        "Bad Request",
        errorBody("validation_failed", "the request is not valid HTTP", requestId()),
      ];
  }
}

const requestId = (): string => `req_${randomBytes(8).toString("hex")}`;
