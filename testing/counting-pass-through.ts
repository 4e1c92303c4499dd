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
  /** JSON-RPC calls of `method` forwarded so far, each call of a batch counted. */
  callsOf(method: string): number;
  close(): Promise<void>;
};

export async function startCountingPassThrough(target: string): Promise<CountingPassThrough> {
  let calls = 0;
  const methods = new Map<string, number>();
  const server = createServer((req, res) => {
    calls++;
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      for (const method of methodsOf(body)) methods.set(method, (methods.get(method) ?? 0) + 1);
      const forward = request(target, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      forward.on("error", () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get calls() {
      return calls;
    },
    callsOf: (method) => methods.get(method) ?? 0,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The methods a JSON-RPC request or batch names; none for a body that is not JSON-RPC. */
function methodsOf(body: Buffer): string[] {
  try {
    const parsed: unknown = JSON.parse(body.toString());
    return (Array.isArray(parsed) ? parsed : [parsed])
      .map((call) => (call as { method?: unknown } | null)?.method)
      .filter((method): method is string => typeof method === "string");
  } catch {
    return [];
  }
}
