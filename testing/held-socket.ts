/**
 * A listening socket held the way a supervisor holds one for systemd socket activation
 * (origin/socket-activation.ts): bound here, listened on and accepted from only by the origins it
 * is handed to (as descriptor 3), and open across their restarts.
 */
import net from "node:net";

export type HeldSocket = {
  /** This process's descriptor of the socket. */
  fd: number;
  port: number;
  close(): void;
};

type TcpHandle = {
  fd: number;
  getsockname(out: { port?: number }): number;
  close(): void;
};

export function holdSocket(host = "127.0.0.1", port = 0): HeldSocket {
  // Node has no public way to bind a socket without listening on it itself (a listening net.Server
  // accepts in this process). _createServerHandle binds only; it is what node:cluster uses to hand
  // one socket to its workers.
  const create = (
    net as unknown as { _createServerHandle(a: string, p: number, t: number): TcpHandle | number }
  )._createServerHandle;
  const handle = create(host, port, 4);
  if (typeof handle === "number") throw new Error(`could not bind ${host}:${port} (error ${handle})`);
  const out: { port?: number } = {};
  handle.getsockname(out);
  return { fd: handle.fd, port: out.port ?? port, close: () => handle.close() };
}
