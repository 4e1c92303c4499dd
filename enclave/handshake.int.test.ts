import { once } from "node:events";
import { stat } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeFrame, MAX_FRAME_BYTES } from "../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE, ENCLAVE_PROTOCOL } from "../shared/constants.ts";
import { makeHello } from "../shared/enclave-protocol.ts";
import { sleep } from "../shared/sleep.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { residentBytes } from "../testing/measure/proc-memory.ts";
import { malformedFrameResponse } from "./dispatch.ts";
import { mintFor, privileged } from "./testing/capabilities.ts";
import { RawEnclaveClient } from "./testing/raw-client.ts";

describe("enclave handshake and framing (real process)", () => {
  let fixture: EnclaveFixture;

  beforeAll(async () => {
    fixture = await createEnclaveFixture();
  });
  afterAll(async () => {
    await fixture?.dispose();
  });

  it("announces protocol svc-hsm/agent/v1 with profile agent_gateway", async () => {
    const { client, serverHello } = await RawEnclaveClient.connect(fixture.socketPath);
    expect(serverHello).toEqual({ v: 1, protocol: ENCLAVE_PROTOCOL, profile: ENCLAVE_PROFILE });
    client.close();
  });

  it("refuses a client hello with another profile with wrong_profile and closes", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath, {
      helloProfile: "bridge_operator",
    });
    expect(await client.next()).toEqual({
      v: 1,
      id: null,
      ok: false,
      error: { code: "wrong_profile", reason: expect.any(String) },
    });
    await client.closed;
  });

  it("refuses a hello with another protocol", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath, { helloProfile: false });
    client.send({ v: 1, protocol: "svc-hsm/agent/v2", profile: ENCLAVE_PROFILE });
    expect(await client.next()).toMatchObject({ id: null, ok: false, error: { code: "wrong_profile" } });
    await client.closed;
  });

  it("answers an undecodable frame with malformed and serves the next request", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    // Declares 3 bytes of CBOR: a map header with no entries following, plus a stray break code.
    client.sendBytes(Uint8Array.of(0, 0, 0, 3, 0xa1, 0xff, 0xff));
    expect(await client.next()).toEqual({
      v: 1,
      id: null,
      ok: false,
      error: { code: "malformed", reason: expect.any(String) },
    });
    const response = await client.request("capability_counter", {
      authority: `0x${"11".repeat(32)}`,
      scope: "admin",
      op: "generate_keys",
    });
    expect(response).toEqual({ v: 1, id: expect.any(Number), ok: true, result: { next_counter: 1 } });
    client.close();
  });

  it("answers an oversize frame with malformed, skips its bytes and serves the next request", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const declared = MAX_FRAME_BYTES + 16;
    const oversize = new Uint8Array(4 + declared).fill(0x61);
    new DataView(oversize.buffer).setUint32(0, declared, false);
    client.sendBytes(oversize);
    expect(await client.next()).toMatchObject({ v: 1, id: null, ok: false, error: { code: "malformed" } });
    const response = await client.request("public_identity", { key_ref: "ab".repeat(32) });
    expect(response).toMatchObject({ ok: false, error: { code: "key_purpose_mismatch" } });
    client.close();
  });

  it("answers an invalid request envelope or unknown op with malformed, echoing the id", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    client.send({ v: 1, id: 7, op: "sign_anything", params: {} });
    expect(await client.next()).toMatchObject({ id: 7, ok: false, error: { code: "malformed" } });
    client.send({ v: 2, id: 8, op: "public_identity", params: {} });
    expect(await client.next()).toMatchObject({ id: 8, ok: false, error: { code: "malformed" } });
    client.send({ v: 1, id: 9, op: "public_identity", params: { key_ref: "not-hex" } });
    expect(await client.next()).toMatchObject({ id: 9, ok: false, error: { code: "malformed" } });
    client.close();
  });

  it("serves many requests in flight on one connection, each answered with its own id and result", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 20,
      batch_id: "in-flight-batch",
    });
    const keys = batch.keys as Array<{ key_ref: string; address: string }>;
    // All twenty in one write, so they are in flight together; each asks about another key.
    const ids = keys.map((_, index) => index + 100);
    client.sendBytes(
      Buffer.concat(
        keys.map((key, index) =>
          encodeFrame({ v: 1, id: ids[index], op: "public_identity", params: { key_ref: key.key_ref } }),
        ),
      ),
    );
    const answers = new Map<number, { key_ref: string; address: string }>();
    for (const _ of ids) {
      const response = (await client.next()) as {
        id: number;
        ok: boolean;
        result: { key_ref: string; address: string };
      };
      expect(response.ok).toBe(true);
      answers.set(response.id, response.result);
    }
    for (const [index, key] of keys.entries()) {
      expect(answers.get(ids[index]!)).toMatchObject({ key_ref: key.key_ref, address: key.address });
    }
    client.close();
  });

  it("answers a fast request sent after a slow one first: requests run concurrently, not in turn", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const slowParams = { namespace: "agent-transfer", count: 1000, batch_id: "slow-batch" };
    const cap = await mintFor(client, fixture, "generate_keys", slowParams);
    // One write: the slow generate_keys (1000 keys, sealed and fsynced) then a fast lookup.
    client.sendBytes(
      Buffer.concat([
        encodeFrame({ v: 1, id: 1, op: "generate_keys", params: slowParams, cap }),
        encodeFrame({ v: 1, id: 2, op: "public_identity", params: { key_ref: "ab".repeat(32) } }),
      ]),
    );
    const first = (await client.next(30_000)) as { id: number };
    const second = (await client.next(30_000)) as { id: number; ok: boolean; result: { keys: unknown[] } };
    expect(first).toMatchObject({ id: 2, ok: false, error: { code: "key_purpose_mismatch" } });
    expect(second).toMatchObject({ id: 1, ok: true });
    expect(second.result.keys).toHaveLength(1000);
    client.close();
  });

  it("creates the socket with mode 0600", async () => {
    expect((await stat(fixture.socketPath)).mode & 0o777).toBe(0o600);
  });

  it("encodes frames the enclave accepts when split across writes", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const frame = encodeFrame({ v: 1, id: 1, op: "public_identity", params: { key_ref: "cd".repeat(32) } });
    for (const byte of frame) client.sendBytes(Uint8Array.of(byte));
    expect(await client.next()).toMatchObject({ id: 1, ok: false, error: { code: "key_purpose_mismatch" } });
    client.close();
  });
});

describe("a client that reads none of its answers (real process)", () => {
  // An enclave of its own: what it holds is measured from a start no other test has grown.
  let fixture: EnclaveFixture;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ start: true });
  });
  afterAll(async () => {
    await fixture?.dispose();
  });

  const hello = encodeFrame({ v: 1, protocol: ENCLAVE_PROTOCOL, profile: ENCLAVE_PROFILE }).length;
  const answer = encodeFrame(malformedFrameResponse("frame does not decode")).length;

  /** A connection that has said hello and written `frames` 4-byte frames declaring no CBOR. */
  const flood = async (frames: number): Promise<Socket> => {
    const socket = connect(fixture.socketPath);
    socket.on("error", () => {});
    await once(socket, "connect");
    socket.pause();
    socket.write(encodeFrame(makeHello(ENCLAVE_PROFILE)));
    for (let sent = 0; sent < 4 * frames; sent += 65_536) socket.write(Buffer.alloc(65_536));
    return socket;
  };
  /** Reads the socket until its hello and an answer to each of `frames` have come (or a minute). */
  const readAnswers = async (socket: Socket, frames: number): Promise<number> => {
    let received = 0;
    socket.on("data", (chunk: Buffer) => {
      received += chunk.length;
    });
    socket.resume();
    const expected = hello + frames * answer;
    for (const deadline = Date.now() + 60_000; received < expected && Date.now() < deadline; )
      await sleep(100);
    return received - hello;
  };

  it("stops reading a client that never reads its answers, its memory bounded, and answers it all once it reads", async () => {
    const pid = fixture.pid()!;
    const rss = async (): Promise<number> =>
      (await residentBytes({ enclave: { pid, tree: false } })).enclave!;
    // A client that reads: what serving frames costs the process once (its heap grown to its
    // working size, its code compiled) is then spent before the measure.
    const reader = await flood(64 * 1024);
    expect(await readAnswers(reader, 64 * 1024)).toBe(64 * 1024 * answer);
    reader.destroy();
    const before = await rss();

    // Two million frames (8 MiB), each answered malformed in about 70 bytes, from a client that
    // reads nothing: every answer stays with the enclave until it is sent.
    const frames = 2 * 1024 * 1024;
    const socket = await flood(frames);
    // Until the enclave has taken it all, or has taken nothing more for two seconds.
    for (let left = socket.writableLength, still = 0; socket.writableLength > 0 && still < 8; ) {
      await sleep(250);
      still = socket.writableLength === left ? still + 1 : 0;
      left = socket.writableLength;
    }
    const grown = (await rss()) - before;
    const unread = socket.writableLength;

    // Another client is served meanwhile.
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const refusal = await client.request("public_identity", { key_ref: "ef".repeat(32) });
    expect(refusal).toMatchObject({ ok: false, error: { code: "key_purpose_mismatch" } });
    client.close();

    // Mutation: without the bounds in enclave/connection.ts the enclave goes on reading, holding
    // the frames and then their answers: it grew by over 60 MB here, and went on growing.
    expect(4 * frames - unread, "bytes the enclave took").toBeLessThan(1024 * 1024);
    expect(grown, "the enclave's resident memory grew by").toBeLessThan(32 * 1024 * 1024);

    // Once the client reads, every frame is answered: the connection was held back, not dropped.
    expect(await readAnswers(socket, frames)).toBe(frames * answer);
    socket.destroy();
  });
});
