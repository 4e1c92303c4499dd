import type { IncomingMessage } from "node:http";
import type { Context } from "hono";
import { BODY_DEADLINE_MS } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { AppError } from "../errors.ts";

/**
 * How long a route waits for a request's body once it starts reading it (shared with the edge): a
 * body slower than this is answered before the route takes anything scarce (an /rpc slot, a
 * database connection), so that no client can hold one by sending slowly.
 */
export { BODY_DEADLINE_MS };

/** `incomplete`: not in full within the deadline, or the client left before it had sent it. */
export type ReadBodyResult = Result<Uint8Array, "too_large" | "incomplete">;

const INCOMPLETE: ReadBodyResult = err("incomplete");

/**
 * Reads a request body of at most `maxBytes` within BODY_DEADLINE_MS, so an oversize, endless or
 * trickling body is never buffered whole nor waited for long. A declared length over the limit is
 * refused before reading; a declared length within it bounds what Node's parser delivers, so the
 * adapter's fast path reads it. Without a declared length (chunked), the Node request is read
 * chunk by chunk and refused at the limit (readChunks). An incomplete body is answered with
 * `bodyIncompleteError`, which closes the connection: its framing is lost.
 */
export async function readBodyLimited(c: Context, maxBytes: number): Promise<ReadBodyResult> {
  const declared = c.req.header("content-length");
  if (declared !== undefined && Number(declared) > maxBytes) return err("too_large");
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<ReadBodyResult>((resolve) => {
    timer = setTimeout(() => resolve(INCOMPLETE), BODY_DEADLINE_MS);
  });
  try {
    // The read goes on after the deadline until the connection closes; it never throws.
    return await Promise.race([readBody(c, incoming, declared, maxBytes), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

async function readBody(
  c: Context,
  incoming: IncomingMessage | undefined,
  declared: string | undefined,
  maxBytes: number,
): Promise<ReadBodyResult> {
  try {
    if (declared !== undefined || !incoming || incoming.readableEnded) {
      const bytes = new Uint8Array(await c.req.arrayBuffer());
      return bytes.byteLength > maxBytes ? err("too_large") : ok(bytes);
    }
    return await readChunks(incoming, maxBytes);
  } catch {
    // The client closed the connection before its body was in (Node's "aborted", the adapter's
    // "Client connection prematurely closed"): no one is left to answer, and nothing was taken.
    return INCOMPLETE;
  }
}

/**
 * Reads a streamed body up to `maxBytes`. Past it, too_large at once, and the rest of the body is
 * read and dropped as it arrives, as Node drops a body no route reads: never left unread. A request
 * destroyed mid-body (a `for await` left early) leaves its kept-alive connection answering nothing
 * more, and a client that pools its connections, the edge among them, sends another client's
 * request on it next. The whole request's deadline (server.ts RECEIVE_TIMEOUTS) ends an endless one.
 */
function readChunks(incoming: IncomingMessage, maxBytes: number): Promise<ReadBodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const settle = (result: ReadBodyResult): void => {
      incoming.off("data", onData);
      incoming.off("end", onEnd);
      incoming.off("close", onClose);
      incoming.off("error", onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      chunks.length = 0;
      settle(err("too_large"));
      // Flowing with no listener: what is still to come is read and dropped.
      incoming.resume();
    };
    const onEnd = (): void => settle(ok(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    // The client closed the connection before its body was in: no one is left to answer.
    const onClose = (): void => settle(INCOMPLETE);
    incoming.on("data", onData);
    incoming.once("end", onEnd);
    incoming.once("close", onClose);
    incoming.once("error", onClose);
  });
}

/**
 * The answer to an incomplete body: 408 `request_timeout`, with `Connection: close`, since the
 * rest of the body may still be on its way and would be read as the next request.
 */
export function bodyIncompleteError(): AppError {
  return new AppError(
    "request_timeout",
    `the request body did not arrive in full within ${BODY_DEADLINE_MS / 1000} s`,
    { headers: { Connection: "close" } },
  );
}
