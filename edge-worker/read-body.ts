/**
 * A request body the edge reads itself before forwarding it (facilitator.ts), read within
 * BODY_DEADLINE_MS. The origin answers a body slower than that 408 (origin/http/read-body.ts);
 * read here without a deadline, a client that declares a length and then sends nothing more was
 * never answered at all, since the request never reached the origin whose deadline would end it.
 */
import { BODY_DEADLINE_MS } from "../shared/constants.ts";
import { errorResponse } from "./errors.ts";

/**
 * The whole body, or undefined when it did not arrive within the deadline or the client left
 * before sending it; the read is then cancelled, so nothing waits on the client any longer.
 */
export async function readBodyWithin(
  request: Request,
  deadlineMs: number = BODY_DEADLINE_MS,
): Promise<ArrayBuffer | undefined> {
  const reader = request.body?.getReader();
  if (!reader) return new ArrayBuffer(0);
  const chunks: Uint8Array[] = [];
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    reader.cancel().catch(() => {});
  }, deadlineMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (timedOut) return undefined;
      if (done) break;
      chunks.push(value);
    }
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
  const body = new Uint8Array(chunks.reduce((total, chunk) => total + chunk.byteLength, 0));
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.byteLength;
  }
  return body.buffer;
}

/** The origin's answer to a body that did not arrive in time, made here, in its words. */
export function bodyTimedOut(requestId: string): Response {
  return errorResponse(
    "request_timeout",
    `the request body did not arrive in full within ${BODY_DEADLINE_MS / 1000} s`,
    requestId,
    { connection: "close" },
  );
}
