/**
 * A webhook receiver on loopback for the webhook tests: it verifies every delivery as a consumer
 * would, `v1` with the `standardwebhooks` package and the endpoint's secret, `v1a` with node:crypto
 * against the key the origin publishes at {base}/.well-known/webhooks/keys, and records each.
 * What it answers is the test's to set: a status, a redirect, or never (a hang). It can stop
 * listening and start again on the same port (a receiver that is down).
 */
import { createPublicKey, type KeyObject, verify } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { Webhook } from "standardwebhooks";

export type ReceivedDelivery = {
  webhookId: string;
  timestamp: string;
  body: { type: string; timestamp: string; data: Record<string, unknown> & { event_id: string } };
  /** The `v1` signature verified with the endpoint's secret (standardwebhooks). */
  v1: boolean;
  /** A `v1a` signature verified against a published key (node:crypto). */
  v1a: boolean;
  path: string;
  /** The body as it came and the three headers: what a test verifies with another secret. */
  raw: string;
  headers: { "webhook-id": string; "webhook-timestamp": string; "webhook-signature": string };
};

/**
 * A status (with headers), or never (a hang). `bodyNeverEnds`: the status and a first piece of the
 * body at once, then nothing more and no end.
 */
export type ReceiverAnswer =
  | { status: number; headers?: Record<string, string>; bodyNeverEnds?: boolean }
  | "hang";

export type WebhookReceiver = {
  url: string;
  received: ReceivedDelivery[];
  /** Every request, whatever its path (a redirect's target counts here). */
  requests: string[];
  answer: (request: IncomingMessage) => ReceiverAnswer;
  /** How long it takes before answering. */
  delayMs: number;
  /** The endpoint's secret (known once `add` printed it). */
  secret: string;
  /** The connections open to it now (the origin's, whatever state their requests are in). */
  openConnections(): number;
  /** The most connections it has had open at once. */
  peakConnections(): number;
  /** Loads the origin's published keys (only those `keep` accepts, when given: a receiver's trust list). */
  loadKeys(keysUrl: string, keep?: (jwk: Record<string, string>) => boolean): Promise<void>;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
};

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const sockets = new Set<Socket>();
  let keys: KeyObject[] = [];
  let server: Server | undefined;
  let port = 0;
  let peak = 0;
  const receiver: WebhookReceiver = {
    url: "",
    received: [],
    requests: [],
    answer: () => ({ status: 204 }),
    delayMs: 0,
    secret: "",
    openConnections: () => sockets.size,
    peakConnections: () => peak,
    async loadKeys(keysUrl, keep = () => true) {
      const response = await fetch(keysUrl);
      const set = (await response.json()) as { keys: Array<Record<string, string>> };
      keys = set.keys
        .filter(keep)
        .map((jwk) => createPublicKey({ key: { kty: jwk.kty!, crv: jwk.crv!, x: jwk.x! }, format: "jwk" }));
    },
    start: () => listen(),
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
      server = undefined;
    },
    async close() {
      await receiver.stop();
    },
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    receiver.requests.push(request.url ?? "");
    const headers = {
      "webhook-id": String(request.headers["webhook-id"] ?? ""),
      "webhook-timestamp": String(request.headers["webhook-timestamp"] ?? ""),
      "webhook-signature": String(request.headers["webhook-signature"] ?? ""),
    };
    if (headers["webhook-id"] !== "") {
      let v1 = false;
      try {
        new Webhook(receiver.secret).verify(raw, headers);
        v1 = true;
      } catch {}
      const content = Buffer.from(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${raw}`);
      const v1a = headers["webhook-signature"]
        .split(" ")
        .filter((each) => each.startsWith("v1a,"))
        .some((each) => keys.some((key) => verify(null, content, key, Buffer.from(each.slice(4), "base64"))));
      receiver.received.push({
        webhookId: headers["webhook-id"],
        timestamp: headers["webhook-timestamp"],
        body: JSON.parse(raw),
        v1,
        v1a,
        path: request.url ?? "",
        raw,
        headers,
      });
    }
    if (receiver.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, receiver.delayMs));
    const answer = receiver.answer(request);
    if (answer === "hang") return;
    if (answer.bodyNeverEnds) {
      response.writeHead(answer.status, answer.headers).write("ok");
      return;
    }
    response.writeHead(answer.status, answer.headers).end();
  };

  const listen = (): Promise<void> =>
    new Promise((resolve) => {
      const next = createServer((request, response) => {
        handle(request, response).catch(() => request.socket.destroy());
      });
      next.on("connection", (socket) => {
        sockets.add(socket);
        peak = Math.max(peak, sockets.size);
        socket.once("close", () => sockets.delete(socket));
      });
      next.listen(port, "127.0.0.1", () => {
        const address = next.address();
        port = typeof address === "object" && address ? address.port : port;
        receiver.url = `http://127.0.0.1:${port}`;
        server = next;
        resolve();
      });
    });
  await listen();
  return receiver;
}
