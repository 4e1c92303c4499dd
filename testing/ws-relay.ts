import { createConnection } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";

export type WsRelay = {
  address: string;
  /** How many WebSocket sessions the relay has carried: proof the driver really went through it. */
  readonly connections: number;
  close(): Promise<void>;
};

/**
 * A WebSocket-to-TCP relay in the shape of Neon's wsproxy (`/v2?address=host:port`), so the
 * Neon serverless driver can be tested for real against a local Postgres. Loopback only.
 */
export function startWsRelay(): Promise<WsRelay> {
  return new Promise((resolve) => {
    const sockets = new Set<WebSocket>();
    let connections = 0;
    const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    server.on("connection", (ws, request) => {
      sockets.add(ws);
      connections++;
      ws.on("close", () => sockets.delete(ws));
      const target = new URL(request.url ?? "/", "http://relay").searchParams.get("address") ?? "";
      const [host = "", portText = ""] = target.split(":");
      if (!["127.0.0.1", "localhost"].includes(host) || !/^\d+$/.test(portText)) {
        ws.close(1008, "loopback targets only");
        return;
      }
      const tcp = createConnection({ host: "127.0.0.1", port: Number(portText) });
      tcp.on("data", (chunk) => ws.send(chunk));
      tcp.on("close", () => ws.close());
      tcp.on("error", () => ws.close());
      ws.on("message", (data: Buffer) => tcp.write(data));
      ws.on("close", () => tcp.destroy());
    });
    server.on("listening", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      resolve({
        address: `127.0.0.1:${port}`,
        get connections() {
          return connections;
        },
        close: () =>
          new Promise((done) => {
            for (const ws of sockets) ws.terminate();
            server.close(() => done());
          }),
      });
    });
  });
}
