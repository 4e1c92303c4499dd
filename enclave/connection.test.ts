import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { encodeFrame } from "../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE } from "../shared/constants.ts";
import { ENCLAVE_WIRE_VERSION, type EnclaveResponse, responseSchema } from "../shared/enclave-protocol.ts";
import { REQUESTS_PER_TURN, serveConnection } from "./connection.ts";
import { RawEnclaveClient } from "./testing/raw-client.ts";

// The connection's own scheduling, on a real socket; the op handler is a counter, since what is
// observed is when answers leave relative to the requests handled (the ops have their own tests).
describe("serveConnection (a burst is handled a slice per turn)", () => {
  let dir: string;
  let server: Server;
  let sockets: Socket[];
  let handled: number;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "enclave-connection-"));
    handled = 0;
    sockets = [];
    server = createServer((socket) => {
      sockets.push(socket);
      serveConnection(socket, {
        announcedProfile: ENCLAVE_PROFILE,
        handle: async (frame): Promise<EnclaveResponse> => {
          handled++;
          const { id } = frame as { id: number };
          return { v: ENCLAVE_WIRE_VERSION, id, ok: true, result: { handled } };
        },
        logger: pino({ level: "silent" }),
      });
    });
    await new Promise<void>((resolve) => server.listen(join(dir, "enclave.sock"), resolve));
  });
  afterEach(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  it("writes the first answers of a burst read at once before it has handled the whole burst, and answers every request", async () => {
    const { client } = await RawEnclaveClient.connect(join(dir, "enclave.sock"));
    const count = 4 * REQUESTS_PER_TURN;
    const frames = Array.from({ length: count }, (_, index) =>
      encodeFrame({ v: ENCLAVE_WIRE_VERSION, id: index + 1, op: "public_identity", params: {} }),
    );
    client.sendBytes(Buffer.concat(frames));
    const first = responseSchema.parse(await client.next());
    // Read while the enclave still has requests of the burst to handle.
    const handledWhenFirstArrived = handled;
    expect(first).toMatchObject({ id: 1, ok: true });
    expect(handledWhenFirstArrived).toBeLessThan(count);
    const ids = [first.id];
    for (let index = 1; index < count; index++) ids.push(responseSchema.parse(await client.next()).id);
    expect(ids).toEqual(Array.from({ length: count }, (_, index) => index + 1));
    client.close();
    await client.closed;
  });
});
