import { Agent, request } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { RPC_MAX_RESPONSE_BYTES } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";

export type UpstreamFailure = "timeout" | "unreachable" | "bad_status" | "bad_body" | "too_large";

export type UpstreamResult = Result<unknown, UpstreamFailure>;

export type JsonRpcUpstream = {
  /** Posts one JSON-RPC payload (object or batch) and returns the parsed body. Never throws. */
  send(payload: unknown): Promise<UpstreamResult>;
  close(): void;
};

export type CreateJsonRpcUpstreamParams = {
  url: string;
  timeoutMs: number;
  /**
   * An answer larger than this is dropped while it streams, not buffered; RPC_MAX_RESPONSE_BYTES
   * by default (the /rpc proxy's cap, which a full batch of the largest legitimate answers fits).
   */
  maxResponseBytes?: number;
};

const DEFAULT_MAX_RESPONSE_BYTES = RPC_MAX_RESPONSE_BYTES;

/**
 * A raw JSON-RPC client for the /rpc proxy and the origin's own calls (json-rpc-call.ts, which
 * reads the answers): keep-alive sockets, a hard timeout per call, and failures returned as data.
 * It adds no parsing beyond JSON, so the proxy stays a thin, fast pass-through.
 */
export function createJsonRpcUpstream(params: CreateJsonRpcUpstreamParams): JsonRpcUpstream {
  const target = new URL(params.url);
  const secure = target.protocol === "https:";
  // Small request/response pairs: never let Nagle hold a body segment back.
  const agent = secure
    ? new HttpsAgent({ keepAlive: true, noDelay: true })
    : new Agent({ keepAlive: true, noDelay: true });
  const send = secure ? httpsRequest : request;
  const maxResponseBytes = params.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  // Resolved once: handing node a URL makes it convert the URL on every call.
  const options = {
    protocol: target.protocol,
    hostname: target.hostname.replace(/^\[|\]$/g, ""),
    port: target.port,
    path: `${target.pathname}${target.search}`,
    // Credentials in the URL (a hosted node's key) become basic auth, as node does for a URL.
    ...(target.username
      ? { auth: `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}` }
      : {}),
    method: "POST",
    agent,
  };
  return {
    send(payload) {
      const body = Buffer.from(JSON.stringify(payload));
      return new Promise<UpstreamResult>((resolve) => {
        const settle = (result: UpstreamResult): void => {
          clearTimeout(timer);
          resolve(result);
        };
        // For a call given up on before its answer ended: its socket cannot be reused.
        const abandon = (failure: UpstreamFailure): void => {
          settle(err(failure));
          req.destroy();
        };
        const req = send(
          { ...options, headers: { "content-type": "application/json", "content-length": body.length } },
          (res) => {
            const chunks: Buffer[] = [];
            let received = 0;
            res.on("data", (chunk: Buffer) => {
              received += chunk.length;
              if (received > maxResponseBytes) abandon("too_large");
              else chunks.push(chunk);
            });
            res.on("end", () => {
              if (res.statusCode !== 200) return settle(err("bad_status"));
              try {
                settle(ok(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
              } catch {
                settle(err("bad_body"));
              }
            });
            res.on("error", () => settle(err("unreachable")));
          },
        );
        // A deadline for the whole call, not just socket idleness: every upstream call times out
        // (CHAIN_RPC_TIMEOUT_MS, docs/configuration.md#variables).
        const timer = setTimeout(() => abandon("timeout"), params.timeoutMs);
        req.on("error", () => settle(err("unreachable")));
        req.end(body);
      });
    },
    close() {
      agent.destroy();
    },
  };
}
