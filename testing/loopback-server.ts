/**
 * An HTTP server on a free loopback port for the test proxies: it keeps the connections it holds,
 * so a proxy can drop them all at once (a cut line) and `close()` ends them instead of waiting for
 * kept-alive clients to leave.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";

export type LoopbackServer = {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** Drops every open connection without an answer. */
  dropConnections(): void;
  /** Drops every open connection and stops listening. */
  close(): Promise<void>;
};

/** Serves `handle`; a request it throws on has its connection destroyed. */
export async function startLoopbackServer(
  handle: (request: IncomingMessage, response: ServerResponse) => Promise<void>,
): Promise<LoopbackServer> {
  const sockets = new Set<Socket>();
  const server = createServer((request, response) => {
    handle(request, response).catch(() => request.socket.destroy());
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const dropConnections = (): void => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    dropConnections,
    close: () =>
      new Promise<void>((resolve) => {
        dropConnections();
        server.close(() => resolve());
      }),
  };
}

/** A request's whole body, as text. */
export async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
