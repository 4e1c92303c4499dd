/**
 * One HTTP attempt of a delivery: a POST that follows no redirect (node's http never does: a 3xx
 * is an answer, and a failure), ends after `timeoutMs` whatever the receiver does (its connection
 * too: a body that never ends is cut there), and connects only to public addresses unless private
 * ones are allowed (address-guard.ts).
 */
import http from "node:http";
import https from "node:https";
import { withinMs } from "../../shared/within-ms.ts";
import { checkWebhookUrl, guardedLookup, type Resolve, systemResolve } from "./address-guard.ts";

/** What is read of an answer's body (and dropped) before the connection is cut: the status is the answer. */
const MAX_BODY_BYTES = 64 * 1024;

export type SendParams = {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  allowPrivate: boolean;
  /** The resolver of both checks (tests give one that changes its answer between them). */
  resolve?: Resolve;
  /**
   * Told once the attempt holds no connection any more: when it is closed, at the latest at the
   * timeout (at once when none was opened). The answer comes before that, with the status.
   */
  onClosed?: () => void;
};

/** The receiver's status (and its `Retry-After`, if any), or why there is none. */
export type SendResult =
  | { ok: true; status: number; retryAfter: string | undefined }
  | { ok: false; error: string };

export async function sendWebhook(params: SendParams): Promise<SendResult> {
  const resolve = params.resolve ?? systemResolve;
  let told = false;
  const closed = (): void => {
    if (told) return;
    told = true;
    params.onClosed?.();
  };
  const endsAt = performance.now() + params.timeoutMs;
  // The name's lookup is part of the attempt: a resolver that hangs (the system's retries can take
  // tens of seconds) holds the delivery's slot no longer than a receiver that never answers.
  const checked = await withinMs(
    checkWebhookUrl(params.url, { allowPrivate: params.allowPrivate, resolve }),
    params.timeoutMs,
  );
  if (checked === undefined) {
    closed();
    return timedOut(params.timeoutMs);
  }
  if (!checked.ok) {
    closed();
    return { ok: false, error: `${checked.code}: ${checked.message}` };
  }
  const url = new URL(params.url);
  const client = url.protocol === "https:" ? https : http;
  return new Promise<SendResult>((done) => {
    let settled = false;
    const finish = (result: SendResult): void => {
      if (settled) return;
      settled = true;
      done(result);
    };
    const request = client.request(
      url,
      {
        method: "POST",
        headers: {
          ...params.headers,
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(params.body)),
        },
        // A fresh connection per attempt, resolved through the guard: a pooled socket would skip
        // the connect-time check. Nothing reuses it, so it is destroyed once the attempt is over.
        agent: false,
        lookup: guardedLookup(resolve, !params.allowPrivate),
      },
      (response) => {
        // The status is the answer, given at once. The body is read and dropped until it ends, its
        // first MAX_BODY_BYTES or the timeout, whichever comes first; then the connection is cut,
        // so a receiver that never ends its body holds no socket of ours past the timeout.
        finish({ ok: true, status: response.statusCode ?? 0, retryAfter: response.headers["retry-after"] });
        let read = 0;
        response.on("data", (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_BODY_BYTES) request.destroy();
        });
        response.on("end", () => request.destroy());
        response.on("error", () => {});
      },
    );
    // Runs to the attempt's end, not to the answer's headers: it also bounds the body.
    const timer = setTimeout(
      () => {
        finish(timedOut(params.timeoutMs));
        request.destroy();
        // Its socket is destroyed: whatever node still has to emit, the attempt holds nothing.
        closed();
      },
      Math.max(0, endsAt - performance.now()),
    );
    request.on("close", () => {
      clearTimeout(timer);
      closed();
    });
    request.on("error", (error: NodeJS.ErrnoException) => {
      finish({ ok: false, error: `${error.code ?? "error"}: ${error.message}` });
    });
    request.end(params.body);
  });
}

function timedOut(timeoutMs: number): SendResult {
  return { ok: false, error: `timeout: no answer within ${timeoutMs} ms` };
}
