import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { generateKeyMaterial, Keystore, materialFromPrivateKey } from "./keystore.ts";
import { generateSealingKey } from "./sealing.ts";

// Keystore.restore in code: a conflicting key_ref cannot be produced through the real enclave
// (key_refs are 32 random bytes), so the keystore is driven directly on a temporary folder.
describe("Keystore.restore", () => {
  let dir: string;
  let store: Keystore;
  const sealingKey = generateSealingKey();
  const open = () => Keystore.open(join(dir, "keys"), sealingKey, pino({ level: "silent" }));

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "keystore-restore-"));
    store = await open();
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("imports a batch once; a repeat writes nothing; it survives a reopen under its own refs", async () => {
    const keys = generateKeyMaterial(2);
    const first = await store.restore({ namespace: "agent-transfer", batchId: "b1", keys });
    expect(first).toMatchObject({ ok: true, value: { imported: 2 } });
    const again = await store.restore({ namespace: "agent-transfer", batchId: "b1", keys });
    expect(again).toMatchObject({ ok: true, value: { imported: 0 } });
    expect(await readdir(join(dir, "keys"))).toHaveLength(1);
    const reopened = await open();
    expect(reopened.get(keys[1]!.keyRef)).toMatchObject({ namespace: "agent-transfer", batchId: "b1" });
    expect(reopened.batch("b1")?.keys.map((key) => key.keyRef)).toEqual(keys.map((key) => key.keyRef));
  });

  it("refuses a key_ref that holds another key, and a batch id that holds other keys, writing nothing", async () => {
    const [held] = generateKeyMaterial(1);
    await store.restore({ namespace: "agent-transfer", batchId: "b1", keys: [held!] });
    const [other] = generateKeyMaterial(1);
    const sameRef = materialFromPrivateKey(other!.privateKey, held!.keyRef);
    expect(await store.restore({ namespace: "agent-transfer", batchId: "b1", keys: [sameRef] })).toEqual({
      ok: false,
      error: "a key_ref of the batch already holds another key",
    });
    expect(await store.restore({ namespace: "agent-transfer", batchId: "b1", keys: [other!] })).toEqual({
      ok: false,
      error: "the batch id already holds other keys",
    });
    expect(await store.restore({ namespace: "faucet", batchId: "b2", keys: [held!] })).toEqual({
      ok: false,
      error: "a key_ref of the batch already holds another key",
    });
    expect(await readdir(join(dir, "keys"))).toHaveLength(1);
    expect(store.get(held!.keyRef)?.address).toBe(held!.address);
  });
});
