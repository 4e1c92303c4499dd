import { Pool } from "undici";
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
 * reads the answers): keep-alive connections, a hard timeout per call, and failures returned as
 * data. It adds no parsing beyond JSON, so the proxy stays a thin, fast pass-through. Built on
 * undici's pool rather than node:http's client, which cost about twice the CPU per call
 * (docs/performance.md, "Authentication and the read routes").
 */
export function createJsonRpcUpstream(params: CreateJsonRpcUpstreamParams): JsonRpcUpstream {
  const target = new URL(params.url);
  const pool = new Pool(target.origin);
  const maxResponseBytes = params.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const path = `${target.pathname}${target.search}`;
  const headers: Record<string, string> = { "content-type": "application/json" };
  // Credentials in the URL (a hosted node's key) become basic auth, as node's client does for a URL.
  if (target.username) {
    const credentials = `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`;
    headers.authorization = `Basic ${Buffer.from(credentials).toString("base64")}`;
  }
  return {
    async send(payload) {
      // A deadline for the whole call, not just socket idleness: every upstream call times out
      // (CHAIN_RPC_TIMEOUT_MS, docs/configuration.md#variables).
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(), params.timeoutMs);
      try {
        const response = await pool.request({
          path,
          method: "POST",
          headers,
          body: JSON.stringify(payload),
          signal: deadline.signal,
        });
        const chunks: Buffer[] = [];
        let received = 0;
        for await (const chunk of response.body as AsyncIterable<Buffer>) {
          received += chunk.length;
          // Dropped while it streams: the rest is never read, and the connection is not reused.
          if (received > maxResponseBytes) {
            response.body.destroy();
            return err("too_large");
          }
          chunks.push(chunk);
        }
        if (response.statusCode !== 200) return err("bad_status");
        try {
          return ok(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        } catch {
          return err("bad_body");
        }
      } catch {
        return err(deadline.signal.aborted ? "timeout" : "unreachable");
      } finally {
        clearTimeout(timer);
      }
    },
    close() {
      void pool.destroy();
    },
  };
}
