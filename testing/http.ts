import { request } from "node:http";
import { responseCheckEnabled, sharedResponseChecker } from "./openapi-check.ts";
import { recordOutput } from "./secret-sink.ts";

export type TestResponse = {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
};

export type SendParams = {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** The Content-Type sent with a body: `application/json` unless given; null sends none. */
  contentType?: string | null;
  /** Source address on the loopback range (127.0.0.0/8), to act as distinct clients. */
  localAddress?: string;
  /**
   * The request target sent as written (`/77/a/%2e%2e/b`), where a URL string would be spelled
   * again by the URL parser first (dot segments resolved) and never reach the server as written.
   */
  rawPath?: string;
};

/**
 * A minimal HTTP client that can choose its source address, which fetch cannot. Every answer is
 * checked against the OpenAPI document (openapi-check.ts; OPENAPI_RESPONSE_CHECK=0 turns it off):
 * an answer the document does not describe fails the test that received it.
 */
export async function send(url: string, params: SendParams = {}): Promise<TestResponse> {
  const response = await sendUnchecked(url, params);
  if (!responseCheckEnabled()) return response;
  const contentType = response.headers["content-type"];
  const problems = sharedResponseChecker().check({
    method: params.method ?? "GET",
    url,
    status: response.status,
    contentType: Array.isArray(contentType) ? contentType[0] : contentType,
    body: response.body,
    headers: response.headers,
  });
  if (problems.length > 0) {
    throw new Error(`the answer does not match the OpenAPI document:\n  ${problems.join("\n  ")}`);
  }
  return response;
}

/** `send` without the document check, for tests that provoke answers outside the contract. */
export function sendUnchecked(url: string, params: SendParams = {}): Promise<TestResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: params.method ?? "GET",
        headers: {
          ...(params.body === undefined || params.contentType === null
            ? {}
            : { "content-type": params.contentType ?? "application/json" }),
          // Framed even on GET, whose bodies Node would otherwise send unframed (the server would
          // read them as the next request).
          ...(params.body === undefined ||
          Object.keys(params.headers ?? {}).some((name) => name.toLowerCase() === "transfer-encoding")
            ? {}
            : { "content-length": String(Buffer.byteLength(params.body)) }),
          ...params.headers,
        },
        localAddress: params.localAddress,
        ...(params.rawPath === undefined ? {} : { path: params.rawPath }),
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          // Error bodies go to the run's secret scan (a 201's token is the one place a token belongs).
          if ((res.statusCode ?? 0) >= 400) recordOutput("error body", text);
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      },
    );
    req.on("error", reject);
    req.end(params.body);
  });
}
