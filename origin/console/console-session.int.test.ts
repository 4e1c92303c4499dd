import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditSchema } from "../../shared/console-schemas.ts";
import { HEADER_CONSOLE_SESSION } from "../../shared/constants.ts";
import type { SessionStarted } from "../../shared/passkey-schemas.ts";
import { consoleCalls, consoleSecrets, withoutRequestId } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { recordSecret } from "../../testing/secret-sink.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { type AssertionOptions, FLAG_UP, SoftwarePasskey } from "../../testing/software-passkey.ts";
import { queryRows } from "../db/client.ts";
import { markEnrolled } from "../passkeys/store.ts";

// Signing in to the console with a passkey, at the real origin over HTTP on a real Postgres. The
// authenticator is testing/software-passkey.ts: a real P-256 credential answering the protocol
// byte for byte, so each refusal below can be made by changing exactly one part of an otherwise
// good assertion (its origin, its challenge, its counter), which a browser's virtual authenticator
// cannot be asked to do; the browser walk (session-walk.int.test.ts) signs in with one. Enrollment
// is the enclave's business (passkeys.int.test.ts runs it); here the passkey is marked enrolled as
// the enroll tool marks it once the enclave sealed it, since a sign-in reads only that mark.
// Each refusal is the same 401 on the wire; the reason is read from the request's log line.

const RP_ID = "localhost";
const ORIGIN = "http://localhost:8080";
const secrets = consoleSecrets();

/** An assertion as startAuthentication returns it (AuthenticationResponseJSON). */
function authenticationResponse(
  passkey: SoftwarePasskey,
  challenge: string,
  options: AssertionOptions = {},
): Record<string, unknown> {
  const assertion = passkey.assert(Buffer.from(challenge, "base64url"), options);
  const b64 = (hex: string) => Buffer.from(hex.slice(2), "hex").toString("base64url");
  return {
    id: passkey.credentialId,
    rawId: passkey.credentialId,
    type: "public-key",
    response: {
      authenticatorData: b64(assertion.authenticatorData),
      clientDataJSON: b64(assertion.clientDataJson),
      signature: b64(assertion.signature),
    },
    clientExtensionResults: {},
  };
}

describe("console sign-in with a passkey (real origin, real Postgres)", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  const logLines: string[] = [];
  const db = () => testDb.handle.db;
  const tokens = () => consoleCalls(origin.base, { admin: secrets.adminToken, change: secrets.changeToken });
  const alice = new SoftwarePasskey(RP_ID, ORIGIN);
  let aliceKeyId: string;

  const withSession = (token: string) => ({ headers: { [HEADER_CONSOLE_SESSION]: token } });
  /** The console API with a session's token and no admin token. */
  const asSession = (token: string) => {
    const calls = consoleCalls(origin.base, {});
    return {
      get: (path: string) => calls.get(path, withSession(token)),
      post: (path: string, body: unknown) => calls.post(path, body, withSession(token)),
    };
  };
  const challenge = async (localAddress?: string): Promise<string> => {
    const answer = await send(`${origin.base}/admin/agents/session/options`, {
      method: "POST",
      body: "{}",
      localAddress,
    });
    expect(answer.status).toBe(200);
    const options = (
      answer.body as { options: { challenge: string; userVerification: string; rpId: string } }
    ).options;
    expect(options).toMatchObject({ userVerification: "required", rpId: RP_ID });
    return options.challenge;
  };
  const signIn = (response: Record<string, unknown>, localAddress?: string): Promise<TestResponse> =>
    send(`${origin.base}/admin/agents/session`, {
      method: "POST",
      body: JSON.stringify({ response }),
      localAddress,
    });
  /** Why the origin refused a request: the reason its log line names (the wire says only 401). */
  const reasonOf = (response: TestResponse): unknown => {
    const id = response.headers["x-request-id"];
    const line = logLines.find((each) => each.includes(`"request_id":"${id}"`) && each.includes('"route"'));
    return line ? JSON.parse(line).reason : undefined;
  };
  const register = async (passkey: SoftwarePasskey, operator: string): Promise<string> => {
    const options = await tokens().post("/passkeys/registration/options", { operator });
    const creation = (options.body as { options: { challenge: string } }).options;
    const done = await tokens().post("/passkeys/registration", {
      operator,
      response: passkey.registrationResponse(creation.challenge),
    });
    expect(done.status).toBe(201);
    return (done.body as { key_id: string }).key_id;
  };
  const signedIn = async (passkey: SoftwarePasskey, signCount: number): Promise<SessionStarted> => {
    const answer = await signIn(authenticationResponse(passkey, await challenge(), { signCount }));
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    // The token is answered once: no cache (the browser's, a proxy's) keeps a copy of it.
    expect(answer.headers["cache-control"]).toBe("no-store");
    // A session token is a secret (docs/security.md): the run's secret scan fails on it in any log.
    recordSecret((answer.body as SessionStarted).token);
    return answer.body as SessionStarted;
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 5);
    origin = await startTestOrigin({
      database: testDb.handle,
      env: { ...secrets.env, CONSOLE_RP_ID: RP_ID, CONSOLE_ORIGIN: ORIGIN },
      onLogLine: (line) => logLines.push(line),
    });
    aliceKeyId = await register(alice, "Alice Martin");
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("refuses a registered passkey that is not enrolled yet, by name, and signs nobody in", async () => {
    const refused = await signIn(authenticationResponse(alice, await challenge(), { signCount: 1 }));
    expect(refused.status).toBe(401);
    expect(withoutRequestId(refused.body)).toEqual({
      error: {
        code: "admin_auth_failed",
        message: `passkey ${aliceKeyId} is registered but not enrolled: the policy authority enrolls it (npm run enclave-policy -- enroll-passkey ${aliceKeyId})`,
      },
    });
    expect(reasonOf(refused)).toBe("not_enrolled");
    const [sessions] = await queryRows<{ n: number }>(
      db(),
      sql`select count(*)::int as n from operator_sessions`,
    );
    expect(sessions!.n).toBe(0);
  });

  it("signs an enrolled passkey in: a session that reads and changes, and the audit names the operator and the passkey", async () => {
    await markEnrolled(db(), alice.credentialId);
    const session = await signedIn(alice, 1);
    expect(session).toMatchObject({ operator: "Alice Martin", key_id: aliceKeyId });
    expect(session.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const hours = (Date.parse(session.expires_at) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(7.9);
    expect(hours).toBeLessThanOrEqual(8);
    // Kept only as its SHA-256.
    const [row] = await queryRows<{ token_hash: string; operator: string; key_id: string }>(
      db(),
      sql`select token_hash, operator, key_id from operator_sessions`,
    );
    expect(row).toEqual({
      token_hash: (await import("node:crypto")).createHash("sha256").update(session.token).digest("hex"),
      operator: "Alice Martin",
      key_id: aliceKeyId,
    });

    const who = await asSession(session.token).get("/session");
    expect(who.status).toBe(200);
    expect(who.body).toEqual({
      operator: "Alice Martin",
      key_id: aliceKeyId,
      expires_at: session.expires_at,
    });
    expect((await asSession(session.token).get("/operations")).status).toBe(200);

    const provisioned = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    const agent = provisioned;
    const disabled = await asSession(session.token).post("/registration/identity", {
      agent_id: agent.agentId,
      action: "disable",
      reason: "looks compromised",
    });
    expect(disabled.status).toBe(200);
    const setting = await asSession(session.token).post("/registration/settings", {
      changes: { per_ip_daily: 7 },
      reason: "tighter",
    });
    expect(setting.status).toBe(200);
    // The same change under the shared tokens names no one.
    const byToken = await tokens().post("/registration/identity", {
      agent_id: agent.agentId,
      action: "enable",
      reason: "false alarm",
    });
    expect(byToken.status).toBe(200);

    const audit = auditSchema.parse((await asSession(session.token).get("/audit")).body);
    expect(audit.changes.filter((change) => change.subject === agent.agentId)).toEqual([
      expect.objectContaining({ change: "enable", source: "console", operator: null, passkey_key_id: null }),
      expect.objectContaining({
        change: "disable",
        source: "console",
        operator: "Alice Martin",
        passkey_key_id: aliceKeyId,
      }),
    ]);
    expect(audit.changes.find((change) => change.subject === "per_ip_daily")).toMatchObject({
      after: "7",
      operator: "Alice Martin",
      passkey_key_id: aliceKeyId,
    });
    // Written with the change, in its table.
    const [recorded] = await queryRows<{ operator: string | null; passkey_key_id: string | null }>(
      db(),
      sql`select operator, passkey_key_id from identity_changes where agent_id = ${agent.agentId} and change = 'disable'`,
    );
    expect(recorded).toEqual({ operator: "Alice Martin", passkey_key_id: aliceKeyId });
  });

  it("signing out ends the session: the next request with it is the same 401 as a wrong token", async () => {
    const session = await signedIn(alice, 2);
    const calls = asSession(session.token);
    expect((await calls.get("/operations")).status).toBe(200);
    const out = await send(`${origin.base}/admin/agents/session`, {
      method: "DELETE",
      ...withSession(session.token),
    });
    expect(out.status).toBe(204);
    const after = await calls.get("/operations");
    const wrongToken = await consoleCalls(origin.base, { admin: "x".repeat(64) }).get("/operations");
    expect(after.status).toBe(401);
    expect(withoutRequestId(after.body)).toEqual(withoutRequestId(wrongToken.body));
  });

  it("an expired session is refused: the same 401", async () => {
    const session = await signedIn(alice, 3);
    expect((await asSession(session.token).get("/audit")).status).toBe(200);
    await db().execute(
      sql`update operator_sessions set expires_at = now() - interval '1 second'
          where key_id = ${aliceKeyId} and ended_at is null`,
    );
    const expired = await asSession(session.token).get("/audit");
    expect(expired.status).toBe(401);
    expect(withoutRequestId(expired.body)).toEqual({
      error: { code: "admin_auth_failed", message: "admin authentication failed" },
    });
  });

  it("refuses an assertion made for another origin", async () => {
    const refused = await signIn(
      authenticationResponse(alice, await challenge(), { signCount: 10, origin: "https://evil.example" }),
    );
    expect(refused.status).toBe(401);
    expect(withoutRequestId(refused.body)).toEqual({
      error: { code: "admin_auth_failed", message: "admin authentication failed" },
    });
    expect(reasonOf(refused)).toBe("does_not_verify");
    expect(logLines.some((line) => line.includes("evil.example"))).toBe(false);
    // The same passkey, counter and fresh challenge from the right origin signs in.
    await signedIn(alice, 10);
  });

  it("refuses an assertion made without user verification (no PIN or biometric asked), and one made for another relying party", async () => {
    // Only the user present flag: whoever holds the device, without its PIN or biometric.
    const unverified = await signIn(
      authenticationResponse(alice, await challenge(), { signCount: 11, flags: FLAG_UP }),
    );
    expect(unverified.status).toBe(401);
    expect(reasonOf(unverified)).toBe("does_not_verify");
    const otherParty = await signIn(
      authenticationResponse(alice, await challenge(), { signCount: 12, rpId: "evil.example" }),
    );
    expect(otherParty.status).toBe(401);
    expect(reasonOf(otherParty)).toBe("does_not_verify");
    await signedIn(alice, 13);
  });

  it("refuses an assertion made inside another origin's frame (crossOrigin, without topOrigin as Safari sends it), and spends its challenge", async () => {
    // The page that framed the console chose what the operator saw; the enclave refuses such an
    // approval (passkey_origin), and a sign-in, which only the origin checks, is refused the same.
    const sessionsOfAlice = async (): Promise<number> => {
      const [row] = await queryRows<{ n: number }>(
        db(),
        sql`select count(*)::int as n from operator_sessions where key_id = ${aliceKeyId}`,
      );
      return row!.n;
    };
    const before = await sessionsOfAlice();
    const given = await challenge();
    const framed = await signIn(authenticationResponse(alice, given, { signCount: 15, crossOrigin: true }));
    expect(framed.status).toBe(401);
    expect(withoutRequestId(framed.body)).toEqual({
      error: { code: "admin_auth_failed", message: "admin authentication failed" },
    });
    expect(reasonOf(framed)).toBe("does_not_verify");
    expect(await sessionsOfAlice()).toBe(before);
    // Its challenge is spent: the same challenge answered from the console's own page is refused too.
    expect((await signIn(authenticationResponse(alice, given, { signCount: 16 }))).status).toBe(401);
    await signedIn(alice, 17);
  });

  it("refuses a challenge used once already, and one the origin never gave", async () => {
    const used = await challenge();
    expect((await signIn(authenticationResponse(alice, used, { signCount: 20 }))).status).toBe(201);
    const replayed = await signIn(authenticationResponse(alice, used, { signCount: 21 }));
    expect(replayed.status).toBe(401);
    expect(reasonOf(replayed)).toBe("does_not_verify");
    const invented = await signIn(
      authenticationResponse(alice, Buffer.alloc(32, 7).toString("base64url"), { signCount: 22 }),
    );
    expect(invented.status).toBe(401);
    expect(reasonOf(invented)).toBe("does_not_verify");
    await signedIn(alice, 23);
  });

  it("signs in once with one assertion sent many times at once: its challenge is taken by the first, whatever the counter", async () => {
    // An authenticator that does not count (signCount 0, as many platform passkeys answer): only
    // the challenge, used once, keeps a captured assertion from opening a second session.
    const carol = new SoftwarePasskey(RP_ID, ORIGIN);
    const carolKeyId = await register(carol, "Carol Diaz");
    await markEnrolled(db(), carol.credentialId);
    const response = authenticationResponse(carol, await challenge(), { signCount: 0 });
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => signIn(response, `127.0.0.${30 + i}`)),
    );
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 401, 401, 401, 401, 401, 401, 401]);
    const [sessions] = await queryRows<{ n: number }>(
      db(),
      sql`select count(*)::int as n from operator_sessions where key_id = ${carolKeyId}`,
    );
    expect(sessions!.n).toBe(1);
  });

  it("a registration's challenge is spent by a refused answer too: the next answer to it is refused", async () => {
    const options = await tokens().post("/passkeys/registration/options", { operator: "Dave Okafor" });
    const { challenge: given } = (options.body as { options: { challenge: string } }).options;
    // An answer made for another origin: the challenge matches, the origin does not.
    const elsewhere = new SoftwarePasskey(RP_ID, "https://evil.example");
    const refused = await tokens().post("/passkeys/registration", {
      operator: "Dave Okafor",
      response: elsewhere.registrationResponse(given),
    });
    expect(refused.status).toBe(400);
    const dave = new SoftwarePasskey(RP_ID, ORIGIN);
    const again = await tokens().post("/passkeys/registration", {
      operator: "Dave Okafor",
      response: dave.registrationResponse(given),
    });
    expect(again.status, JSON.stringify(again.body)).toBe(400);
    const [kept] = await queryRows<{ n: number }>(
      db(),
      sql`select count(*)::int as n from operator_passkeys where operator = 'Dave Okafor'`,
    );
    expect(kept!.n).toBe(0);
  });

  it("refuses a counter that did not move forward (a clone), and keeps the highest counter seen", async () => {
    await signedIn(alice, 100);
    const stale = await signIn(authenticationResponse(alice, await challenge(), { signCount: 100 }));
    expect(stale.status).toBe(401);
    expect(reasonOf(stale)).toBe("stale_counter");
    const older = await signIn(authenticationResponse(alice, await challenge(), { signCount: 50 }));
    expect(older.status).toBe(401);
    expect(reasonOf(older)).toBe("stale_counter");
    const [row] = await queryRows<{ sign_count: string }>(
      db(),
      sql`select sign_count::text from operator_passkeys where credential_id = ${alice.credentialId}`,
    );
    expect(row!.sign_count).toBe("100");
    await signedIn(alice, 101);
  });

  it("one client opens 30 sign-ins a minute, then 429; another client is not held up by it", async () => {
    const flooding = "127.0.0.12";
    for (let i = 0; i < 30; i++) await challenge(flooding);
    const refused = await send(`${origin.base}/admin/agents/session/options`, {
      method: "POST",
      body: "{}",
      localAddress: flooding,
    });
    expect(refused.status).toBe(429);
    expect(refused.headers["retry-after"]).toBeDefined();
    // Another address still signs in.
    const other = "127.0.0.13";
    const answer = await signIn(
      authenticationResponse(alice, await challenge(other), { signCount: 150 }),
      other,
    );
    expect(answer.status).toBe(201);
  });

  it("a session changes only on a node that takes changes: without the registration secret, a change is feature_disabled and a read works", async () => {
    const readOnlyNode = await startTestOrigin({
      database: testDb.handle,
      env: { AGENT_ADMIN_API_TOKEN: secrets.adminToken, CONSOLE_RP_ID: RP_ID, CONSOLE_ORIGIN: ORIGIN },
    });
    try {
      const answer = await send(`${readOnlyNode.base}/admin/agents/session/options`, {
        method: "POST",
        body: "{}",
      });
      const { challenge: given } = (answer.body as { options: { challenge: string } }).options;
      const started = await send(`${readOnlyNode.base}/admin/agents/session`, {
        method: "POST",
        body: JSON.stringify({ response: authenticationResponse(alice, given, { signCount: 200 }) }),
      });
      expect(started.status).toBe(201);
      const { token } = started.body as SessionStarted;
      recordSecret(token);
      const calls = consoleCalls(readOnlyNode.base, {});
      expect((await calls.get("/operations", withSession(token))).status).toBe(200);
      const change = await calls.post(
        "/registration/settings",
        { changes: { per_ip_daily: 9 }, reason: "not here" },
        withSession(token),
      );
      expect(change.status).toBe(404);
      expect((change.body as { error: { code: string } }).error.code).toBe("feature_disabled");
    } finally {
      await readOnlyNode.close();
    }
  });

  it("refuses an unknown passkey, and counts each refused sign-in as a failed admin authentication (429 past the limit)", async () => {
    const stranger = new SoftwarePasskey(RP_ID, ORIGIN);
    const address = "127.0.0.9";
    const response = authenticationResponse(stranger, await challenge(address));
    const unknown = await signIn(response, address);
    expect(unknown.status).toBe(401);
    expect(reasonOf(unknown)).toBe("unknown_passkey");
    // Twenty failures in the window in all (docs/operations.md#the-operator-console-and-metrics).
    for (let i = 1; i < 20; i++) expect((await signIn(response, address)).status).toBe(401);
    const blocked = await send(`${origin.base}/admin/agents/operations`, {
      headers: { "x-admin-api-token": secrets.adminToken },
      localAddress: address,
    });
    expect(blocked.status).toBe(429);
  });

  it("refuses an assertion whose id is no credential id (a NUL, a space, too short) as an unknown passkey, counted: never a failed database query", async () => {
    const address = "127.0.0.10";
    const good = authenticationResponse(alice, await challenge(address));
    const ids = ["\u0000", `${alice.credentialId}\u0000`, "not a credential id", "c2hvcnQ"];
    // Five rounds: the twenty failures the window allows, each one counted.
    for (const id of [...ids, ...ids, ...ids, ...ids, ...ids]) {
      const answer = await signIn({ ...good, id, rawId: id }, address);
      expect(answer.status, `${JSON.stringify(id)}: ${JSON.stringify(answer.body)}`).toBe(401);
      expect(reasonOf(answer)).toBe("unknown_passkey");
    }
    const blocked = await send(`${origin.base}/admin/agents/operations`, {
      headers: { "x-admin-api-token": secrets.adminToken },
      localAddress: address,
    });
    expect(blocked.status).toBe(429);
  });

  it("a session registers a passkey under its own operator's name only; another name is refused and nothing is kept", async () => {
    // The audit names a passkey's operator for every approval it makes: a session registering one
    // under another's name would have the audit name them for what it approves.
    const session = await signedIn(alice, 300);
    const calls = asSession(session.token);
    const refusal = {
      status: 400,
      body: {
        error: {
          code: "validation_failed",
          message:
            "signed in as Alice Martin: a session registers passkeys under its own operator's name only, not Bob Stone",
        },
      },
    };
    const asBob = await calls.post("/passkeys/registration/options", { operator: "Bob Stone" });
    expect({ status: asBob.status, body: withoutRequestId(asBob.body) }).toEqual(refusal);
    // Options under her own name, then the answer sent under another's: refused the same.
    const own = await calls.post("/passkeys/registration/options", { operator: "Alice Martin" });
    expect(own.status).toBe(200);
    const { challenge: given } = (own.body as { options: { challenge: string } }).options;
    const laptop = new SoftwarePasskey(RP_ID, ORIGIN);
    const sentAsBob = await calls.post("/passkeys/registration", {
      operator: "Bob Stone",
      response: laptop.registrationResponse(given),
    });
    expect({ status: sentAsBob.status, body: withoutRequestId(sentAsBob.body) }).toEqual(refusal);
    const [bobs] = await queryRows<{ n: number }>(
      db(),
      sql`select count(*)::int as n from operator_passkeys where operator = 'Bob Stone'`,
    );
    expect(bobs!.n).toBe(0);
    // Her own name registers, from the session alone.
    const registered = await calls.post("/passkeys/registration", {
      operator: "Alice Martin",
      response: laptop.registrationResponse(given),
    });
    expect(registered.status, JSON.stringify(registered.body)).toBe(201);
    expect(registered.body).toMatchObject({ operator: "Alice Martin", credential_id: laptop.credentialId });
    // The shared tokens name whoever the body names (automation, the first operator's bootstrap).
    expect(await register(new SoftwarePasskey(RP_ID, ORIGIN), "Bob Stone")).toMatch(/^pk-/);
  });

  it("a credential or key registered already is refused, 409 naming the passkey kept, and the kept row is unchanged; a registration answers the row kept", async () => {
    const listed = async (): Promise<Array<Record<string, unknown>>> =>
      ((await tokens().get("/passkeys")).body as { passkeys: Array<Record<string, unknown>> }).passkeys;
    const before = await listed();
    const registerAs = async (passkey: SoftwarePasskey, operator: string): Promise<TestResponse> => {
      const options = await tokens().post("/passkeys/registration/options", { operator });
      const { challenge: given } = (options.body as { options: { challenge: string } }).options;
      return tokens().post("/passkeys/registration", {
        operator,
        response: passkey.registrationResponse(given),
      });
    };
    const conflict = {
      status: 409,
      body: {
        error: {
          code: "idempotency_conflict",
          message: `registration refused: this credential or its key is registered already, as ${aliceKeyId} for Alice Martin (enrolled); nothing was changed`,
        },
      },
    };
    // Alice's credential id (the list shows it to anyone with the read token) with another key.
    const sameCredential = new SoftwarePasskey(RP_ID, ORIGIN);
    Object.defineProperty(sameCredential, "credentialId", { value: alice.credentialId });
    const byCredential = await registerAs(sameCredential, "Mallory Quinn");
    expect({ status: byCredential.status, body: withoutRequestId(byCredential.body) }).toEqual(conflict);
    // Alice's public key under a new credential id: the same key id.
    const sameKey = new SoftwarePasskey(RP_ID, ORIGIN);
    Object.defineProperty(sameKey, "publicKey", { value: alice.publicKey });
    const byKey = await registerAs(sameKey, "Mallory Quinn");
    expect({ status: byKey.status, body: withoutRequestId(byKey.body) }).toEqual(conflict);
    expect(await listed()).toEqual(before);
    // A new one answers what the list then shows.
    const erin = await registerAs(new SoftwarePasskey(RP_ID, ORIGIN), "Erin Park");
    expect(erin.status).toBe(201);
    expect((await listed())[0]).toEqual(erin.body);
  });

  it("a sign-in opened before nine clients open all the sign-ins they may (30 each, 270 in all) is still answered: each client's share of the open challenges is bounded", async () => {
    const operatorAddress = "127.0.0.40";
    const given = await challenge(operatorAddress);
    for (let client = 0; client < 9; client++) {
      const address = `127.0.0.${50 + client}`;
      await Promise.all(Array.from({ length: 30 }, () => challenge(address)));
    }
    const answer = await signIn(authenticationResponse(alice, given, { signCount: 310 }), operatorAddress);
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    recordSecret((answer.body as SessionStarted).token);
    // A flooding client's newest challenge still works too: only its own oldest made way.
    const flooder = "127.0.0.60";
    const opened: string[] = [];
    for (let i = 0; i < 20; i++) opened.push(await challenge(flooder));
    const oldest = await signIn(authenticationResponse(alice, opened[0]!, { signCount: 311 }), flooder);
    expect(oldest.status).toBe(401);
    expect(reasonOf(oldest)).toBe("does_not_verify");
    const newest = await signIn(authenticationResponse(alice, opened.at(-1)!, { signCount: 312 }), flooder);
    expect(newest.status).toBe(201);
    recordSecret((newest.body as SessionStarted).token);
  });

  it("signing out everywhere ends every live session of the signed-in operator, this one too, and no one else's; under the tokens it names no one, 400", async () => {
    const live = async (operator: string): Promise<number> => {
      const [row] = await queryRows<{ n: number }>(
        db(),
        sql`select count(*)::int as n from operator_sessions
            where operator = ${operator} and ended_at is null and expires_at > now()`,
      );
      return row!.n;
    };
    const here = await signedIn(alice, 400);
    const elsewhere = await signedIn(alice, 401);
    const carol = await queryRows<{ credential_id: string }>(
      db(),
      sql`select credential_id from operator_passkeys where operator = 'Carol Diaz'`,
    );
    expect(carol).toHaveLength(1);
    const aliceLive = await live("Alice Martin");
    expect(aliceLive).toBeGreaterThanOrEqual(2);
    const carolLive = await live("Carol Diaz");
    expect(carolLive).toBeGreaterThanOrEqual(1);

    const ended = await send(`${origin.base}/admin/agents/session/end-all`, {
      method: "POST",
      ...withSession(here.token),
    });
    expect({ status: ended.status, body: ended.body }).toEqual({
      status: 200,
      body: { operator: "Alice Martin", ended: aliceLive },
    });
    expect(await live("Alice Martin")).toBe(0);
    expect(await live("Carol Diaz")).toBe(carolLive);
    const wrongToken = await consoleCalls(origin.base, { admin: "x".repeat(64) }).get("/operations");
    for (const token of [here.token, elsewhere.token]) {
      const after = await asSession(token).get("/operations");
      expect(after.status).toBe(401);
      expect(withoutRequestId(after.body)).toEqual(withoutRequestId(wrongToken.body));
    }
    // A new sign-in works again.
    const again = await signedIn(alice, 402);
    expect((await asSession(again.token).get("/operations")).status).toBe(200);

    const byTokens = await send(`${origin.base}/admin/agents/session/end-all`, {
      method: "POST",
      headers: { "x-admin-api-token": secrets.adminToken },
    });
    expect({ status: byTokens.status, body: withoutRequestId(byTokens.body) }).toEqual({
      status: 400,
      body: {
        error: {
          code: "validation_failed",
          message:
            "signing out everywhere ends the sessions of the operator signed in with x-console-session",
        },
      },
    });
    expect(await live("Alice Martin")).toBe(1);
  });

  it("an operator's name is kept trimmed and composed (NFC): spaces around it or another Unicode form name the same operator; an empty name or a control character is refused", async () => {
    const registeredAs = async (operator: string): Promise<TestResponse> => {
      const options = await tokens().post("/passkeys/registration/options", { operator });
      expect(options.status, JSON.stringify(options.body)).toBe(200);
      const { challenge: given } = (options.body as { options: { challenge: string } }).options;
      return tokens().post("/passkeys/registration", {
        operator,
        response: new SoftwarePasskey(RP_ID, ORIGIN).registrationResponse(given),
      });
    };
    // "Zoë Park" typed with a combining diaeresis and a space after it, then as composed.
    const decomposed = await registeredAs("Zoe\u0308 Park ");
    expect(decomposed.status, JSON.stringify(decomposed.body)).toBe(201);
    expect(decomposed.body).toMatchObject({ operator: "Zo\u00eb Park" });
    expect((await registeredAs("Zo\u00eb Park")).status).toBe(201);
    const names = await queryRows<{ operator: string }>(
      db(),
      sql`select distinct operator from operator_passkeys where operator like 'Zo%'`,
    );
    expect(names).toEqual([{ operator: "Zo\u00eb Park" }]);
    // A session registers under its own name however the body spaces it.
    const session = await signedIn(alice, 500);
    const own = await asSession(session.token).post("/passkeys/registration/options", {
      operator: " Alice Martin",
    });
    expect(own.status, JSON.stringify(own.body)).toBe(200);
    // A name that is only spaces, or holds a control character (C1 NEL here), is refused.
    for (const [operator, message] of [
      ["   ", "the operator's name is empty"],
      ["Mallory\u0085Quinn", "the operator's name holds a control character"],
    ] as const) {
      const refused = await tokens().post("/passkeys/registration/options", { operator });
      expect({ status: refused.status, body: withoutRequestId(refused.body) }).toEqual({
        status: 400,
        body: { error: { code: "validation_failed", message } },
      });
    }
  });
});

describe("console sessions past their retention (the console's sweep, real origin, real Postgres)", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin | undefined;
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("deletes a session that expired more than 30 days ago, and keeps one ended or expired within them and a live one", async () => {
    testDb = await createTestDatabase();
    const session = (hash: string, expiresAt: string, endedAt: string | null) =>
      testDb.handle.db.execute(
        sql`insert into operator_sessions (token_hash, operator, key_id, created_at, expires_at, ended_at)
            values (${hash.repeat(64)}, 'Alice Martin', 'pk-0000000000000000',
                    (${expiresAt}::timestamptz - interval '8 hours'), ${expiresAt}::timestamptz,
                    ${endedAt}::timestamptz)`,
      );
    const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
    await session("a", daysAgo(31), null);
    await session("b", daysAgo(31), daysAgo(31.2));
    await session("c", daysAgo(29), null);
    await session("d", daysAgo(1), daysAgo(1.1));
    await session("e", new Date(Date.now() + 3_600_000).toISOString(), null);
    // The console's workers sweep as they start, then hourly.
    origin = await startTestOrigin({
      database: testDb.handle,
      env: consoleSecrets().env,
      workers: ["console"],
    });
    const kept = async (): Promise<string[]> =>
      (
        await queryRows<{ first: string }>(
          testDb.handle.db,
          sql`select left(token_hash, 1) as first from operator_sessions order by token_hash`,
        )
      ).map((row) => row.first);
    await expect.poll(kept, { timeout: 30_000 }).toEqual(["c", "d", "e"]);
  });
});
