/**
 * The origin's place-holder for the edge's Miniflare suite: a real Node HTTP server on 127.0.0.1
 * that records every request it receives and answers through a handler the test gives. It stands
 * in for the origin only because the edge's routing must be tested without the origin's routes
 * (the registration endpoint is a later issue); nothing here mimics the origin's logic.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type ReceivedRequest = {
  method: string;
  /** Path and query, raw as they arrived. */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
};

export type OriginHandler = (request: ReceivedRequest, response: ServerResponse) => void;

export type OriginStandIn = {
  /** `http://127.0.0.1:<port>`, the edge's ORIGIN_URL. */
  url: string;
  /** Every request received so far, oldest first; clear it with `received.length = 0`. */
  received: ReceivedRequest[];
  close(): Promise<void>;
};

/** Starts the stand-in on a free loopback port. */
export async function startOriginStandIn(handler: OriginHandler): Promise<OriginStandIn> {
  const received: ReceivedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const request: ReceivedRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      received.push(request);
      handler(request, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
