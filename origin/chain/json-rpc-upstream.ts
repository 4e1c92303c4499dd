import { type Dispatcher, Pool } from "undici";
import { RPC_MAX_RESPONSE_BYTES } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";

export type UpstreamFailure = "timeout" | "unreachable" | "bad_status" | "bad_body" | "too_large";

export type UpstreamResult = Result<unknown, UpstreamFailure>;

export type JsonRpcUpstream = {
  /** Posts one JSON-RPC payload (object or batch) and returns the parsed body. Never throws. */
  send(payload: unknown): Promise<UpstreamResult>;
  close(): void;
  /**
   * The most calls the node takes in one batch (CHAIN_RPC_BATCH_LIMIT); the origin's own batches
   * (json-rpc-call.ts) are sent in parts of at most this many. None: no limit.
   */
  readonly maxBatchCalls?: number;
};

export type CreateJsonRpcUpstreamParams = {
  url: string;
  timeoutMs: number;
  /**
   * An answer larger than this is dropped while it streams, not buffered; RPC_MAX_RESPONSE_BYTES
   * by default (the /rpc proxy's cap, which a full batch of the largest legitimate answers fits).
   */
  maxResponseBytes?: number;
  /** The upstream's maxBatchCalls; none unless given. */
  maxBatchCalls?: number;
};

const DEFAULT_MAX_RESPONSE_BYTES = RPC_MAX_RESPONSE_BYTES;

/**
 * A raw JSON-RPC client for the /rpc proxy and the origin's own calls (json-rpc-call.ts, which
 * reads the answers): keep-alive connections, a hard timeout per call, and failures returned as
 * data. It adds no parsing beyond JSON, so the proxy stays a thin, fast pass-through. Built on
 * undici's pool rather than node:http's client, which cost about twice the CPU per call, and on the
 * pool's dispatch with a handler of its own rather than its request API, whose abort signal, body
 * stream and async iteration cost about as much again (docs/performance.md, "Authentication and
 * the read routes").
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
    maxBatchCalls: params.maxBatchCalls,
    send(payload) {
      return new Promise<UpstreamResult>((resolve) => {
        let settled = false;
        // The request's own controller, once the pool has started it.
        let controller: Dispatcher.DispatchController | undefined;
        // Settles once; a call that ends early (timeout, too large) aborts the request, which drops
        // its connection rather than reading the rest.
        const finish = (result: UpstreamResult): void => {
          if (settled) return;
          settled = true;
          clearTimeout(deadline);
          if (!result.ok && (result.error === "timeout" || result.error === "too_large")) {
            controller?.abort(new Error(result.error));
          }
          resolve(result);
        };
        // A deadline for the whole call, not just socket idleness: every upstream call times out
        // (CHAIN_RPC_TIMEOUT_MS, docs/configuration.md#variables).
        const deadline = setTimeout(() => finish(err("timeout")), params.timeoutMs);
        let status = 0;
        let received = 0;
        const chunks: Buffer[] = [];
        try {
          pool.dispatch(
            { path, method: "POST", headers, body: JSON.stringify(payload) },
            {
              onRequestStart(started) {
                controller = started;
                // Timed out while it waited for a connection: never sent.
                if (settled) started.abort(new Error("timeout"));
              },
              onResponseStart(_controller, statusCode) {
                status = statusCode;
              },
              onResponseData(_controller, chunk) {
                received += chunk.length;
                // Dropped while it streams: the rest is never read, and the connection is not reused.
                if (received > maxResponseBytes) return finish(err("too_large"));
                chunks.push(chunk);
              },
              onResponseEnd() {
                if (status !== 200) return finish(err("bad_status"));
                let body: unknown;
                try {
                  body = JSON.parse(Buffer.concat(chunks, received).toString("utf8"));
                } catch {
                  return finish(err("bad_body"));
                }
                finish(ok(body));
              },
              onResponseError() {
                finish(err("unreachable"));
              },
            },
          );
        } catch {
          finish(err("unreachable"));
        }
      });
    },
    close() {
      void pool.destroy();
    },
  };
}
