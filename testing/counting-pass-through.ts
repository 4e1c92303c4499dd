/**
 * A counting pass-through in front of a JSON-RPC node (the devnet): every request is forwarded as
 * it came and counted, so a test reads what reached the chain, not what it changed.
 */
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";

export type CountingPassThrough = {
  /** The address to give the origin as its chain. */
  url: string;
  /** Requests forwarded so far. */
  readonly calls: number;
  close(): Promise<void>;
};

export async function startCountingPassThrough(target: string): Promise<CountingPassThrough> {
  let calls = 0;
  const server = createServer((req, res) => {
    calls++;
    const forward = request(target, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get calls() {
      return calls;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
