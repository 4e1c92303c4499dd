import type { IncomingMessage } from "node:http";
import type { Context } from "hono";

export type ReadBodyResult = { ok: true; bytes: Uint8Array } | { ok: false; reason: "too_large" };

/**
 * Reads a request body of at most `maxBytes`, refusing as soon as the declared length or the
 * bytes received pass the limit, so an oversize or endless body is never buffered whole. On Node
 * it reads the IncomingMessage directly, skipping the Web-stream conversion on the hot path.
 */
export async function readBodyLimited(c: Context, maxBytes: number): Promise<ReadBodyResult> {
  if (Number(c.req.header("content-length") ?? "0") > maxBytes) return { ok: false, reason: "too_large" };
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (!incoming || incoming.readableEnded) {
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    return bytes.byteLength > maxBytes ? { ok: false, reason: "too_large" } : { ok: true, bytes };
  }
  const chunks: Buffer[] = [];
  let received = 0;
  for await (const chunk of incoming as AsyncIterable<Buffer>) {
    received += chunk.length;
    if (received > maxBytes) {
      // Stop reading; the rest is discarded when the response ends the request.
      incoming.resume();
      return { ok: false, reason: "too_large" };
    }
    chunks.push(chunk);
  }
  return { ok: true, bytes: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) };
}
