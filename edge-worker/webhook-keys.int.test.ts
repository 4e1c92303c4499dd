import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureWebhookSigningKeyFile } from "../origin/webhooks/signing.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";

// The webhooks' public key set is public: the real worker in Miniflare routes GET to it, and
// nothing else under /.well-known.

const EDGE_SECRET = randomBytes(32).toString("hex");

describe("the webhooks' key set through the edge", () => {
  let db: TestDatabase;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  beforeAll(async () => {
    db = await createTestDatabase();
    const keyFile = path.join(await mkdtemp(path.join(tmpdir(), "webhook-keys-")), "webhook-signing.key");
    await ensureWebhookSigningKeyFile(keyFile);
    origin = await startTestOrigin({
      database: db.handle,
      env: { AGENT_WEBHOOKS_SIGNING_KEY_FILE: keyFile, AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
      workers: [],
    });
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, onLine: () => {} });
  });
  afterAll(async () => {
    await edge?.stop();
    await origin?.close();
    await db?.drop();
  });

  it("serves GET {base}/.well-known/webhooks/keys as the origin does, and no other method or path there", async () => {
    const direct = await fetch(`${origin.base}/.well-known/webhooks/keys`);
    const through = await fetch(`${edge.url}/77/.well-known/webhooks/keys`);
    expect(through.status).toBe(200);
    const body = (await through.json()) as { keys: Array<Record<string, string>> };
    expect(body).toEqual(await direct.json());
    expect(body.keys).toEqual([
      {
        kty: "OKP",
        crv: "Ed25519",
        x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        kid: expect.any(String),
      },
    ]);
    expect((await fetch(`${edge.url}/77/.well-known/webhooks/keys`, { method: "POST" })).status).toBe(404);
    expect((await fetch(`${edge.url}/77/.well-known/other`)).status).toBe(404);
  });
});
