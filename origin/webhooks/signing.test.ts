import { createPublicKey, verify } from "node:crypto";
import { chmod, mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  addWebhookSigningKey,
  ensureWebhookSigningKeyFile,
  hmacSignature,
  loadWebhookSigningKeys,
  newEndpointSecret,
  readWebhookKeyFile,
  retireWebhookSigningKey,
  signatureHeader,
  signedContent,
  type WebhookKeyFile,
} from "./signing.ts";

/** The key file read and checked, as the operator tool reads it before it changes anything. */
async function readKeyFile(file: string): Promise<WebhookKeyFile> {
  const read = await readWebhookKeyFile(file);
  if (!read.ok) throw new Error(read.error.message);
  return read.value;
}

describe("webhook signing", () => {
  it("signs v1 exactly as the standardwebhooks library does", () => {
    const secret = newEndpointSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const timestamp = 1_764_000_000;
    const body = '{"type":"action.confirmed","timestamp":"2026-11-29T19:00:00.000Z","data":{"event_id":"7"}}';
    const reference = new Webhook(secret).sign("msg_7", new Date(timestamp * 1000), body);
    expect(hmacSignature(secret, signedContent("msg_7", timestamp, body))).toBe(reference);
  });

  it("makes a 0600 PKCS#8 key once, derives its kid from the key, and refuses a key file its group or others may read", async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), "webhook-key-")), "key.pem");
    await ensureWebhookSigningKeyFile(file);
    const pem = await readFile(file, "utf8");
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    await ensureWebhookSigningKeyFile(file);
    expect(await readFile(file, "utf8")).toBe(pem);
    const [key] = await loadWebhookSigningKeys(file);
    expect(key!.jwk.kid).toHaveLength(22);
    expect((await loadWebhookSigningKeys(file)).map((each) => each.jwk)).toEqual([key!.jwk]);
    // Group alone, others alone, and both: any bit past the owner's refuses it.
    for (const mode of [0o640, 0o604, 0o644]) {
      await chmod(file, mode);
      const refused = await loadWebhookSigningKeys(file).then(
        () => undefined,
        (error: Error) => error.message,
      );
      expect(refused, mode.toString(8)).toMatch(/group or others may read it/);
      expect(refused).not.toContain("PRIVATE KEY");
    }
  });

  it("rotates: add-key appends a newest key (0600 kept), both sign each delivery, retire-key removes the old, never the last", async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), "webhook-key-")), "key.pem");
    await ensureWebhookSigningKeyFile(file);
    const [old] = await loadWebhookSigningKeys(file);
    const added = await addWebhookSigningKey(await readKeyFile(file));
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const keys = await loadWebhookSigningKeys(file);
    // Newest first; each kid is its own key's.
    expect(keys.map((each) => each.jwk.kid)).toEqual([added.jwk.kid, old!.jwk.kid]);
    expect(added.jwk.kid).not.toBe(old!.jwk.kid);

    const secret = newEndpointSecret();
    const body = '{"type":"action.confirmed","timestamp":"2026-11-29T19:00:00.000Z","data":{"event_id":"9"}}';
    const timestamp = Math.floor(Date.now() / 1000);
    const header = signatureHeader({ secrets: [secret], keys, webhookId: "msg_9", timestamp, body });
    const entries = header.split(" ");
    expect(entries.map((each) => each.split(",")[0])).toEqual(["v1", "v1a", "v1a"]);
    // A receiver holding either key set verifies; the standardwebhooks library verifies v1 and
    // passes over the v1a entries.
    const content = Buffer.from(signedContent("msg_9", timestamp, body));
    const verifies = (jwk: { kty: string; crv: string; x: string }, entry: string): boolean =>
      verify(
        null,
        content,
        createPublicKey({ key: jwk, format: "jwk" }),
        Buffer.from(entry.slice(4), "base64"),
      );
    expect(verifies(added.jwk, entries[1]!)).toBe(true);
    expect(verifies(old!.jwk, entries[2]!)).toBe(true);
    expect(verifies(old!.jwk, entries[1]!)).toBe(false);
    expect(
      new Webhook(secret).verify(body, {
        "webhook-id": "msg_9",
        "webhook-timestamp": String(timestamp),
        "webhook-signature": header,
      }),
    ).toEqual(JSON.parse(body));

    expect(await retireWebhookSigningKey(await readKeyFile(file), "not-a-kid")).toEqual({
      ok: false,
      error: "no_such_kid",
    });
    expect(await retireWebhookSigningKey(await readKeyFile(file), old!.jwk.kid)).toEqual({ ok: true });
    expect((await loadWebhookSigningKeys(file)).map((each) => each.jwk.kid)).toEqual([added.jwk.kid]);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await retireWebhookSigningKey(await readKeyFile(file), added.jwk.kid)).toEqual({
      ok: false,
      error: "last_key",
    });
    expect((await loadWebhookSigningKeys(file)).map((each) => each.jwk.kid)).toEqual([added.jwk.kid]);
  });
});
