import { stat } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEnclaveFixture, type EnclaveFixture } from "../scripts/test/enclave-process.ts";
import { encodeFrame, MAX_FRAME_BYTES } from "../shared/cbor-frame.ts";
import { ENCLAVE_PROFILE, ENCLAVE_PROTOCOL } from "../shared/constants.ts";
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

  it("serves many requests in flight on one connection, each answered with its own id", async () => {
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const ids = Array.from({ length: 20 }, (_, index) => index + 100);
    for (const id of ids) {
      client.send({
        v: 1,
        id,
        op: "capability_counter",
        params: { authority: `0x${"22".repeat(32)}`, scope: "recovery", op: "restore_backup" },
      });
    }
    const seen: unknown[] = [];
    for (const _ of ids) seen.push(((await client.next()) as { id: unknown }).id);
    expect(seen.sort()).toEqual([...ids].sort());
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
