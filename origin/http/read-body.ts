import type { IncomingMessage } from "node:http";
import type { Context } from "hono";

export type ReadBodyResult = { ok: true; bytes: Uint8Array } | { ok: false; reason: "too_large" };

/**
 * Reads a request body of at most `maxBytes`, so an oversize or endless body is never buffered
 * whole. A declared length over the limit is refused before reading; a declared length within it
 * bounds what Node's parser delivers, so the adapter's fast path reads it. Without a declared
 * length (chunked), the Node request is read chunk by chunk and cut off at the limit.
 */
export async function readBodyLimited(c: Context, maxBytes: number): Promise<ReadBodyResult> {
  const declared = c.req.header("content-length");
  if (declared !== undefined && Number(declared) > maxBytes) return { ok: false, reason: "too_large" };
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (declared !== undefined || !incoming || incoming.readableEnded) {
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
