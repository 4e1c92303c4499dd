/**
 * Replies the real enclave never sends (undecodable, off-schema, another protocol) can only come
 * from a stand-in peer, so these tests use a small socket server speaking raw frames.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { encodeFrame, FrameDecoder } from "../../shared/cbor-frame.ts";
import { createSocketSignerClient } from "./socket-client.ts";

type Behaviour = (socket: Socket, request: { id: number; op: string }) => void;

const HELLO = { v: 1, protocol: "svc-hsm/agent/v1", profile: "agent_gateway" };

describe("socket transport against a stand-in peer", () => {
  let dir: string;
  let socketPath: string;
  let server: Server | null = null;

  const serve = async (options: { hello?: unknown; onRequest?: Behaviour }): Promise<void> => {
    server = createServer((socket) => {
      socket.write(encodeFrame(options.hello ?? HELLO));
      const decoder = new FrameDecoder();
      let helloSeen = false;
      socket.on("data", (chunk: Buffer) => {
        for (const event of decoder.push(chunk)) {
          if (event.kind !== "frame") continue;
          if (!helloSeen) {
            helloSeen = true;
            continue;
          }
          options.onRequest?.(socket, event.value as { id: number; op: string });
        }
      });
      socket.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => server!.listen(socketPath, resolve));
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "signer-transport-"));
    socketPath = join(dir, "peer.sock");
  });
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = null;
    await rm(dir, { recursive: true, force: true });
  });

  it("classes a reply that does not match the op schema as terminal_malformed", async () => {
    await serve({
      onRequest: (socket, request) =>
        socket.write(encodeFrame({ v: 1, id: request.id, ok: true, result: { key_ref: 42 } })),
    });
    const client = createSocketSignerClient({ socketPath });
    expect(await client.publicIdentity({ keyRef: "ab".repeat(32) })).toMatchObject({
      ok: false,
      error: { class: "terminal_malformed", code: "malformed_reply" },
    });
    await client.close();
  });

  it("classes an undecodable reply frame as terminal_malformed for the requests in flight", async () => {
    await serve({ onRequest: (socket) => socket.write(Uint8Array.of(0, 0, 0, 2, 0xa1, 0xff)) });
    const client = createSocketSignerClient({ socketPath });
    expect(await client.publicIdentity({ keyRef: "ab".repeat(32) })).toMatchObject({
      error: { class: "terminal_malformed", code: "malformed_reply" },
    });
    await client.close();
  });

  it("classes a peer speaking another protocol as terminal_wire", async () => {
    await serve({ hello: { v: 1, protocol: "svc-hsm/agent/v2", profile: "agent_gateway" } });
    const client = createSocketSignerClient({ socketPath });
    expect(await client.publicIdentity({ keyRef: "ab".repeat(32) })).toMatchObject({
      error: { class: "terminal_wire", code: "protocol_mismatch" },
    });
    await client.close();
  });

  it("classes a peer that never says hello as retryable unreachable", async () => {
    // Reads (so it sees the client hang up) but never answers.
    server = createServer((socket) => socket.on("error", () => undefined).resume());
    await new Promise<void>((resolve) => server!.listen(socketPath, resolve));
    const client = createSocketSignerClient({ socketPath, connectTimeoutMs: 200 });
    expect(await client.publicIdentity({ keyRef: "ab".repeat(32) })).toMatchObject({
      error: { class: "retryable", code: "signer_unreachable" },
    });
    await client.close();
  });

  it("matches out-of-order replies to their requests by id", async () => {
    const held: Array<{ socket: Socket; id: number }> = [];
    await serve({
      onRequest: (socket, request) => {
        held.push({ socket, id: request.id });
        if (held.length < 2) return;
        for (const { socket: peer, id } of held.reverse()) {
          peer.write(encodeFrame({ v: 1, id, ok: true, result: { next_counter: id } }));
        }
      },
    });
    const client = createSocketSignerClient({ socketPath });
    const query = {
      authority: `0x${"00".repeat(32)}` as const,
      scope: "admin" as const,
      op: "generate_keys" as const,
    };
    const [first, second] = await Promise.all([
      client.capabilityCounter(query),
      client.capabilityCounter(query),
    ]);
    expect(first).toEqual({ ok: true, value: { nextCounter: 1 } });
    expect(second).toEqual({ ok: true, value: { nextCounter: 2 } });
    await client.close();
  });
});
