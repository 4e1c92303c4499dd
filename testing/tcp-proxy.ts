/**
 * A TCP proxy on a free loopback port in front of a real server (the devnet), that a fault test
 * can cut and restore: the chain becomes unreachable for the origin while the devnet itself, and
 * everything the test reads from it directly, stays up.
 */
import { connect, createServer, type Socket } from "node:net";

/**
 * How a cut looks from the client: `reset` closes every connection at once (a refused or dropped
 * link: the client learns at once); `blackhole` accepts and never answers (a partition: the
 * client learns only from its own timeout).
 */
export type CutMode = "reset" | "blackhole";

export type TcpProxy = {
  /** `http://127.0.0.1:<port>` of the proxy, with the target URL's path. */
  url: string;
  /** Drops every open connection and treats new ones per `mode` until restore(). */
  cut(mode?: CutMode): void;
  /**
   * Every open connection stops carrying bytes either way and stays open (a link gone silent: a
   * NAT or a proxy that forgot it); its ends learn nothing, not even that the other end closed it.
   * New connections are carried as before.
   */
  stall(): void;
  restore(): void;
  close(): Promise<void>;
};

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  const links = new Set<{ client: Socket; upstream: Socket; stalled: boolean }>();
  let mode: CutMode | undefined;
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  };
  const server = createServer((client) => {
    track(client);
    if (mode === "reset") return void client.resetAndDestroy();
    if (mode === "blackhole") return; // held open, never answered, dropped at restore()
    const upstream = connect({ host: target.hostname, port: Number(target.port) });
    track(upstream);
    client.pipe(upstream).pipe(client);
    const link = { client, upstream, stalled: false };
    links.add(link);
    // A stalled link carries no close either: the FIN of one end is lost with everything else.
    client.on("close", () => {
      links.delete(link);
      if (!link.stalled) upstream.destroy();
    });
    upstream.on("close", () => {
      if (!link.stalled) client.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const dropAll = (): void => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${port}${target.pathname === "/" ? "" : target.pathname}`,
    cut(cutMode = "reset") {
      mode = cutMode;
      dropAll();
    },
    stall() {
      for (const link of links) {
        const { client, upstream } = link;
        link.stalled = true;
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
      links.clear();
    },
    restore() {
      mode = undefined;
      // Blackholed connections would otherwise stay open until the client gives up on them.
      dropAll();
    },
    async close() {
      dropAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
