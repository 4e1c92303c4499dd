import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_CLIENT_IP, HEADER_EDGE_SECRET } from "../../shared/constants.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { median, probabilityOfSuperiority } from "../../testing/measure/stats.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { agentIdentities } from "../db/schema.ts";
import { provisionIdentity } from "../keypool/provision.ts";

// No token oracle (docs/security.md). Four wrong presentations (an unknown token, a real token id
// with a wrong secret, a malformed token, a disabled identity's real token) must be answered alike:
// the same status, the same body apart from request_id, the same headers, and times that do not
// tell them apart, against the real origin app and Postgres.

const EDGE_SECRET = randomBytes(32).toString("hex");
type Kind = "unknown" | "wrong_secret" | "malformed" | "disabled";
const KINDS: Kind[] = ["unknown", "wrong_secret", "malformed", "disabled"];

describe("no token oracle", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  /** The origin's own duration of each request (its request log line), by request id. */
  const serverMs = new Map<string, number>();
  const tokens = {} as Record<Kind, () => string>;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    const db = testDb.handle.db;
    await seedFreeKeys(db, 2);
    const live = await provisionIdentity(db, { capabilities: ["read"], origin: "operator" });
    const disabled = await provisionIdentity(db, { capabilities: ["read"], origin: "operator" });
    if (!live.ok || !disabled.ok) throw new Error("provisioning failed");
    await db
      .update(agentIdentities)
      .set({ enabled: false })
      .where(eq(agentIdentities.agentId, disabled.value.agentId));
    const hex = (bytes: number) => randomBytes(bytes).toString("hex");
    tokens.unknown = () => `agt_${hex(16)}_${hex(32)}`;
    tokens.wrong_secret = () => `${live.value.token.slice(0, 4 + 32)}_${hex(32)}`;
    tokens.malformed = () => `agt_${hex(15)}_${hex(32)}`;
    tokens.disabled = () => disabled.value.token;
    origin = await startTestOrigin({
      database: testDb.handle,
      env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
      onLogLine: (line) => {
        const entry = JSON.parse(line) as { msg?: string; request_id?: string; ms?: number };
        if (entry.msg === "request" && entry.request_id && entry.ms !== undefined)
          serverMs.set(entry.request_id, entry.ms);
      },
    });
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  /** Each request from its own client address (through the edge's header), so the pre-auth tier never fills. */
  const present = (token: string) =>
    fetch(`${origin.base}/agent/v1/network`, {
      headers: {
        authorization: `Bearer ${token}`,
        [HEADER_EDGE_SECRET]: EDGE_SECRET,
        [HEADER_CLIENT_IP]: `198.51.${randomBytes(1)[0]}.${1 + (randomBytes(1)[0]! % 250)}`,
      },
    });

  it("answers every kind with the same status, body (apart from request_id) and headers", async () => {
    const seen = [];
    for (const kind of KINDS) {
      const response = await present(tokens[kind]());
      const body = (await response.json()) as { error: Record<string, unknown> };
      expect(body.error.request_id).toMatch(/^req_/);
      const { request_id: _id, ...rest } = body.error;
      const headers = [...response.headers.keys()].filter(
        (name) => !["date", "x-request-id", "content-length"].includes(name),
      );
      seen.push({ kind, status: response.status, error: rest, headers });
    }
    for (const entry of seen) {
      expect({ ...entry, kind: "any" }).toEqual({
        kind: "any",
        status: 401,
        error: { code: "agent_auth_failed", message: "authentication failed" },
        headers: seen[0]!.headers,
      });
    }
  });

  it("takes times that do not tell the kinds apart (overlap of the distributions, many alternating samples)", async () => {
    const ROUNDS = 150;
    const times: Record<Kind, number[]> = { unknown: [], wrong_secret: [], malformed: [], disabled: [] };
    // Warm-up: connections, prepared statements, JIT.
    for (let i = 0; i < 20; i++)
      for (const kind of KINDS) await (await present(tokens[kind]())).arrayBuffer();
    for (let round = 0; round < ROUNDS; round++) {
      // A fresh order each round, so drift in the machine's load falls on every kind alike.
      const order = [...KINDS].sort(() => Math.random() - 0.5);
      for (const kind of order) {
        const response = await present(tokens[kind]());
        await response.arrayBuffer();
        expect(response.status).toBe(401);
        // Timed by the origin itself (request start to answer), so the client's and the
        // loopback's scheduling noise stays out; what is left is the work the origin did.
        const ms = serverMs.get(response.headers.get("x-request-id") ?? "");
        if (ms === undefined) throw new Error("no request log line for the answer");
        times[kind].push(ms);
      }
    }
    const report = KINDS.map((kind) => `${kind} median ${median(times[kind]).toFixed(3)} ms`).join(", ");
    process.stdout.write(`[token oracle] ${report}\n`);
    // Same distribution: P(one is faster) ≈ 0.5, its standard error here ≈ 0.033, so [0.25, 0.75]
    // is over seven standard errors wide and noise shared by all kinds stays inside it. A path that
    // skips or adds a database read (the malformed token did, before) lands near 0 or 1.
    for (const a of KINDS) {
      for (const b of KINDS) {
        if (a >= b) continue;
        const p = probabilityOfSuperiority(times[a], times[b]);
        expect(p, `${a} vs ${b}: P(faster) ${p.toFixed(3)}; ${report}`).toBeGreaterThan(0.25);
        expect(p, `${a} vs ${b}: P(faster) ${p.toFixed(3)}; ${report}`).toBeLessThan(0.75);
      }
    }
  });
});
