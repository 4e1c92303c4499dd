/**
 * JSON-RPC over HTTP on node:http: POST a request or a batch, get JSON back. Kept thin, since
 * the gateway benchmark compares its /rpc proxy against calls made straight to this server.
 * GET answers a small health document, for launchers that poll readiness.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { MAX_REQUEST_BYTES } from "../constants.ts";
import type { DevnetLogger } from "../logger.ts";
import { dispatch, failure, RPC_ERROR_CODES, type RpcMethods } from "./json-rpc.ts";

export type RpcServer = { url: string; port: number; close(): Promise<void> };

export type StartRpcServerParams = {
  host: string;
  port: number;
  methods: RpcMethods;
  logger: DevnetLogger;
  health(): Record<string, unknown>;
  /** The most calls one batch may carry (json-rpc.ts dispatch). */
  maxBatchLength?: number;
};

export async function startRpcServer(params: StartRpcServerParams): Promise<RpcServer> {
  const { methods, logger } = params;
  const onInternalError = (method: string, error: unknown): void => {
    logger.error(
      { method, error: error instanceof Error ? error.stack : String(error) },
      "rpc handler failed",
    );
  };

  const server = createServer((req, res) => {
    if (req.method === "GET") return send(res, 200, params.health());
    if (req.method !== "POST") {
      res.writeHead(405, { allow: "GET, POST" }).end();
      return;
    }
    readBody(req)
      .then(async (body) => {
        if (body === undefined)
          return send(res, 413, failure(null, RPC_ERROR_CODES.invalidRequest, "request too large"));
        let payload: unknown;
        try {
          payload = JSON.parse(body);
        } catch {
          return send(res, 200, failure(null, RPC_ERROR_CODES.parseError, "parse error"));
        }
        const response = await dispatch(payload, methods, onInternalError, params.maxBatchLength);
        if (response === undefined) res.writeHead(204).end();
        else send(res, 200, response);
      })
      .catch((error: unknown) => {
        onInternalError("(transport)", error);
        if (!res.headersSent) send(res, 500, failure(null, RPC_ERROR_CODES.internalError, "internal error"));
      });
  });
  // Clients such as viem keep connections alive between polls; outlive their idle periods.
  server.keepAliveTimeout = 30_000;

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(params.port, params.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = params.host.includes(":") ? `[${params.host}]` : params.host;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeIdleConnections();
        // Requests still running (a mining transaction) get a moment; then sockets are cut.
        setTimeout(() => server.closeAllConnections(), 2_000).unref();
      }),
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** The body as text, or undefined once it exceeds MAX_REQUEST_BYTES. */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on("end", () => resolve(tooLarge ? undefined : Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}
