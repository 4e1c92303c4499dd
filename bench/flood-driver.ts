/**
 * The flood's own process (bench/flood-phases.ts forks it): the edge (the worker in Miniflare) and
 * the load sent through it. Apart from the bench process, so the flood's event loop never delays
 * the agent's timed requests, and so its CPU (workerd, the load, the local front when it is used)
 * is one tree the bench can read. Loopback only, bounded by
 * count or by time. Driven over the fork's IPC channel (FloodMessage, FloodReply).
 */
import { randomBytes } from "node:crypto";
import { Agent, request } from "node:http";
import { startEdge } from "../dev/edge.ts";
import { HEADER_CLIENT_IP, HEADER_EDGE_SECRET, HEADER_REGISTRATION_IP } from "../shared/constants.ts";

/**
 * Where the flood goes: through the edge, or straight at the origin with the headers the edge
 * would add (its secret, the client's address), standing for an edge that forwards at any rate.
 * Through the edge means the worker's own socket, each request with the client's address in
 * CF-Connecting-IP as Cloudflare's front sets it, as bench:x402 reaches the edge; or, with
 * `throughFront` (BENCH_FLOOD_FRONT=1), the local edge as `npm start` serves it: the client-address
 * front (dev/edge.ts) and Miniflare's entry worker before the worker, each address a loopback
 * source address.
 */
export type FloodPath = "edge" | "origin";

/**
 * One kind of request, sent from `addresses` in turn: as loopback source addresses through the
 * edge, as the client address the edge would name straight at the origin.
 */
export type FloodRequest = {
  path: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  addresses: string[];
  /** A fresh well-formed bearer token on every request (a scanner's guesses). */
  randomBearer?: boolean;
};

/** Exactly `count` requests, `concurrency` at a time; or `rate` a second for `seconds`, open loop. */
export type FloodLoad =
  | { count: number; concurrency: number }
  | { rate: number; seconds: number; maxInFlight: number };

export type FloodTally = {
  /** Requests sent and answered (or failed). */
  sent: number;
  /** Requests the schedule called for that were not sent: `maxInFlight` were already out. */
  skipped: number;
  errors: number;
  statuses: Record<string, number>;
  ms: number;
};

export type FloodMessage =
  | { type: "start"; originUrl: string; edgeSecret: string; throughFront: boolean }
  | { type: "run"; id: number; via: FloodPath; request: FloodRequest; load: FloodLoad }
  | { type: "stop" };

export type FloodReply = { type: "ready"; url: string } | { type: "done"; id: number; tally: FloodTally };

const send = (reply: FloodReply): void => void process.send?.(reply);

function agentsFor(addresses: string[], inFlight: number): Agent[] {
  const perAddress = Math.max(1, Math.ceil(inFlight / addresses.length));
  return addresses.map(
    (localAddress) => new Agent({ keepAlive: true, maxSockets: perAddress, localAddress }),
  );
}

async function run(via: FloodPath, spec: FloodRequest, load: FloodLoad): Promise<FloodTally> {
  const tally: FloodTally = { sent: 0, skipped: 0, errors: 0, statuses: {}, ms: 0 };
  const inFlight = "count" in load ? load.concurrency : load.maxInFlight;
  const bySourceAddress = via === "edge" && throughFront;
  const agents = bySourceAddress ? agentsFor(spec.addresses, inFlight) : agentsFor(["127.0.0.1"], inFlight);
  const url = `${via === "edge" ? edgeUrl : originUrl}${spec.path}`;
  let next = 0;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const turn = next++;
      const headers = { ...spec.headers };
      const address = spec.addresses[turn % spec.addresses.length]!;
      if (via === "edge" && !throughFront) headers["cf-connecting-ip"] = address;
      if (via === "origin") {
        headers[HEADER_EDGE_SECRET] = edgeSecret;
        headers[HEADER_CLIENT_IP] = address;
        headers[HEADER_REGISTRATION_IP] = address;
      }
      if (spec.randomBearer) {
        headers.authorization = `Bearer agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;
      }
      const req = request(
        url,
        { method: spec.method, agent: agents[turn % agents.length], headers },
        (res) => {
          res.resume();
          res.on("end", () => {
            tally.sent++;
            const status = String(res.statusCode ?? 0);
            tally.statuses[status] = (tally.statuses[status] ?? 0) + 1;
            resolve();
          });
        },
      );
      req.on("error", () => {
        tally.sent++;
        tally.errors++;
        resolve();
      });
      req.end(spec.body);
    });

  const started = performance.now();
  if ("count" in load) {
    let issued = 0;
    await Promise.all(
      Array.from({ length: load.concurrency }, async () => {
        while (issued++ < load.count) await one();
      }),
    );
  } else {
    // Open loop: the schedule does not wait for answers, so a slow service is flooded all the same;
    // past maxInFlight the due requests are counted as skipped rather than queued without bound.
    let inFlight = 0;
    let due = 0;
    const out = new Set<Promise<void>>();
    const end = started + load.seconds * 1000;
    while (performance.now() < end) {
      const shouldHave = Math.floor(((performance.now() - started) / 1000) * load.rate);
      while (due < shouldHave) {
        due++;
        if (inFlight >= load.maxInFlight) {
          tally.skipped++;
          continue;
        }
        inFlight++;
        const answered = one().then(() => {
          inFlight--;
          out.delete(answered);
        });
        out.add(answered);
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await Promise.all(out);
  }
  tally.ms = performance.now() - started;
  for (const agent of agents) agent.destroy();
  return tally;
}

let stopEdge: (() => Promise<void>) | undefined;
let edgeUrl = "";
let originUrl = "";
let edgeSecret = "";
let throughFront = false;
process.on("message", (message: FloodMessage) => {
  void (async () => {
    switch (message.type) {
      case "start": {
        const edge = await startEdge({
          originUrl: message.originUrl,
          edgeSharedSecret: message.edgeSecret,
          onLine: () => {},
          directSocket: !message.throughFront,
        });
        stopEdge = () => edge.stop();
        throughFront = message.throughFront;
        edgeUrl = throughFront ? edge.url : edge.directUrl!.origin;
        originUrl = message.originUrl;
        edgeSecret = message.edgeSecret;
        send({ type: "ready", url: edge.url });
        return;
      }
      case "run":
        send({ type: "done", id: message.id, tally: await run(message.via, message.request, message.load) });
        return;
      case "stop":
        await stopEdge?.();
        process.exit(0);
    }
  })().catch((error: unknown) => {
    process.stderr.write(
      `flood driver: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  });
});
