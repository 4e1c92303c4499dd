import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { encodeFrame, FrameDecoder } from "../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE } from "../shared/constants.ts";
import { makeHello } from "../shared/enclave-protocol.ts";

/** What the fake answers to one request: a result, an enclave error, or any raw value. */
export type FaultReply =
  | { result: unknown }
  | { error: { code: string; reason?: string } }
  | { raw: unknown }
  | { hang: true };

export type FaultEnclave = { endpoint: string; socketPath: string; close(): Promise<void> };

/**
 * A FAKE enclave, for faults the real one cannot be made to produce (an answer for another key,
 * a forged proof, a reply outside the schema): it speaks the real framing and handshake and lets
 * the test decide each reply. Named as a fake wherever it is used.
 */
export async function startFaultEnclave(
  reply: (op: string, params: Record<string, unknown>) => FaultReply | Promise<FaultReply>,
): Promise<FaultEnclave> {
  const dir = await mkdtemp(path.join(tmpdir(), "fault-enclave-"));
  const socketPath = path.join(dir, "enclave.sock");
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.write(encodeFrame(makeHello(ENCLAVE_PROFILE)));
    const decoder = new FrameDecoder();
    let greeted = false;
    socket.on("data", async (chunk: Buffer) => {
      for (const event of decoder.push(chunk)) {
        if (event.kind !== "frame") continue;
        if (!greeted) {
          greeted = true;
          continue;
        }
        const request = event.value as { id: number | string; op: string; params: Record<string, unknown> };
        const answer = await reply(request.op, request.params);
        if ("hang" in answer) continue;
        const frame =
          "raw" in answer
            ? answer.raw
            : "result" in answer
              ? { v: 1, id: request.id, ok: true, result: answer.result }
              : { v: 1, id: request.id, ok: false, error: { reason: "", ...answer.error } };
        socket.write(encodeFrame(frame));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    endpoint: `unix://${socketPath}`,
    socketPath,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Changes one answer of the real enclave; returns it unchanged to pass it through, or undefined to
 * lose it on the way back (the request was served in full: a reply that never arrives).
 */
export type RewriteAnswer = (
  op: string,
  response: Record<string, unknown>,
) => Record<string, unknown> | undefined;

/**
 * A FAKE in front of the real enclave, for answers the real one cannot be made to give (a
 * verify_backup or restore_backup that reports other keys): it forwards every request to the real
 * enclave at `realSocketPath`, capability and all, and passes every answer back through `rewrite`.
 * Named as a fake wherever it is used.
 */
export async function startRewritingEnclaveProxy(
  realSocketPath: string,
  rewrite: RewriteAnswer,
): Promise<FaultEnclave> {
  const dir = await mkdtemp(path.join(tmpdir(), "fault-enclave-proxy-"));
  const socketPath = path.join(dir, "enclave.sock");
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(realSocketPath);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
      socket.on("error", () => {});
    }
    client.write(encodeFrame(makeHello(ENCLAVE_PROFILE)));
    upstream.write(encodeFrame(makeHello(ENCLAVE_PROFILE)));
    const opsById = new Map<unknown, string>();
    const fromClient = new FrameDecoder();
    const fromUpstream = new FrameDecoder();
    let clientGreeted = false;
    let upstreamGreeted = false;
    client.on("data", (chunk: Buffer) => {
      for (const event of fromClient.push(chunk)) {
        if (event.kind !== "frame") continue;
        if (!clientGreeted) {
          clientGreeted = true;
          continue;
        }
        const request = event.value as { id: unknown; op: string };
        opsById.set(request.id, request.op);
        upstream.write(encodeFrame(event.value));
      }
    });
    upstream.on("data", (chunk: Buffer) => {
      for (const event of fromUpstream.push(chunk)) {
        if (event.kind !== "frame") continue;
        if (!upstreamGreeted) {
          upstreamGreeted = true;
          continue;
        }
        const response = event.value as Record<string, unknown>;
        const op = opsById.get(response.id);
        opsById.delete(response.id);
        const answer = op === undefined ? response : rewrite(op, response);
        if (answer !== undefined) client.write(encodeFrame(answer));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    endpoint: `unix://${socketPath}`,
    socketPath,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
