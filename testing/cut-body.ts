/**
 * An answer cut after its headers: the status and headers go out with the first bytes of a body
 * declared longer, then the connection is destroyed, as a line cut in the middle of an answer.
 * The client has the headers (a settlement's PAYMENT-RESPONSE, say) and never the whole body.
 */
import type { OutgoingHttpHeaders, ServerResponse } from "node:http";

export function answerCutAfterHeaders(
  response: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  firstBytes = "{",
): void {
  response.writeHead(status, { ...headers, "content-length": String(firstBytes.length + 1_000) });
  // Flushed before the cut, so the headers and the first bytes reach the client for certain.
  response.write(firstBytes, () => response.socket?.destroy());
}
