import { chmod, mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  ensureWebhookSigningKeyFile,
  hmacSignature,
  loadWebhookSigningKey,
  newEndpointSecret,
  signedContent,
} from "./signing.ts";

describe("webhook signing", () => {
  it("signs v1 exactly as the standardwebhooks library does", () => {
    const secret = newEndpointSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const timestamp = 1_764_000_000;
    const body = '{"type":"action.confirmed","timestamp":"2026-11-29T19:00:00.000Z","data":{"event_id":"7"}}';
    const reference = new Webhook(secret).sign("msg_7", new Date(timestamp * 1000), body);
    expect(hmacSignature(secret, signedContent("msg_7", timestamp, body))).toBe(reference);
  });

  it("makes a 0600 PKCS#8 key once, derives its kid from the key, and refuses a key file others may read", async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), "webhook-key-")), "key.pem");
    await ensureWebhookSigningKeyFile(file);
    const pem = await readFile(file, "utf8");
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    await ensureWebhookSigningKeyFile(file);
    expect(await readFile(file, "utf8")).toBe(pem);
    const key = await loadWebhookSigningKey(file);
    expect(key.jwk.kid).toHaveLength(22);
    expect((await loadWebhookSigningKey(file)).jwk).toEqual(key.jwk);
    await chmod(file, 0o644);
    const refused = await loadWebhookSigningKey(file).then(
      () => undefined,
      (error: Error) => error.message,
    );
    expect(refused).toMatch(/group or others may read it/);
    expect(refused).not.toContain("PRIVATE KEY");
  });
});
