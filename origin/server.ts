import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import type { AppEnv } from "./http/env.ts";

export type RunningServer = {
  url: string;
  port: number;
  /** Stops accepting, lets in-flight requests finish (up to `drainMs`), then closes the rest. */
  close(drainMs?: number): Promise<void>;
};

export function startHttpServer(app: Hono<AppEnv>, host: string, port: number): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info: AddressInfo) => {
      const url = `http://${host.includes(":") ? `[${host}]` : host}:${info.port}`;
      resolve({
        url,
        port: info.port,
        close(drainMs = 10_000) {
          return new Promise((done) => {
            const force = setTimeout(() => {
              if ("closeAllConnections" in server) server.closeAllConnections();
            }, drainMs);
            server.close(() => {
              clearTimeout(force);
              done();
            });
            // Idle keep-alive sockets would otherwise hold close() open until they time out.
            if ("closeIdleConnections" in server) server.closeIdleConnections();
          });
        },
      });
    });
    server.once("error", reject);
  });
}
