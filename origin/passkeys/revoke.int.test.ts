import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { enrollPendingPasskey } from "../../ops/lib/passkey-enroll.ts";
import { minterFor } from "../../ops/lib/policy-operator.ts";
import { auditSchema } from "../../shared/console-schemas.ts";
import { HEADER_CONSOLE_SESSION } from "../../shared/constants.ts";
import type { ApprovalOptions, PasskeyView, SessionStarted } from "../../shared/passkey-schemas.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { runTool } from "../../testing/run-tool.ts";
import { recordSecret } from "../../testing/secret-sink.ts";
import { SoftwarePasskey } from "../../testing/software-passkey.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import { markEnrolled } from "./store.ts";

// Revoking a lost or stolen passkey (docs/operations.md#revoking-a-passkey), on the real stack: the
// origin over HTTP, the enclave process, Postgres. Two operators each register a passkey in the
// console and the policy authority's holder enrolls both; Bob, signed in with his, revokes Alice's.
// From then on the enclave refuses her passkey's approvals by name, even sent to it straight past
// the origin's own check (as a compromised origin could), her passkey signs no one in, the session
// it signed in ends, it is never enrolled again, and the audit names Bob as who revoked it.

const RP_ID = "localhost";
const ORIGIN = "http://localhost:8080";

/** An assertion as startAuthentication returns it (AuthenticationResponseJSON). */
function authenticationResponse(passkey: SoftwarePasskey, challenge: string): Record<string, unknown> {
  const assertion = passkey.assert(Buffer.from(challenge, "base64url"));
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

describe("revoking a passkey (real stack: origin, enclave, Postgres)", () => {
  const stack = useMoneyStack();
  const secrets = consoleSecrets();
  const logLines: string[] = [];
  const origin = useStackOrigin("console with passkeys", stack, () => ({
    env: { ...secrets.env, CONSOLE_RP_ID: RP_ID, CONSOLE_ORIGIN: ORIGIN },
    onLogLine: (line) => logLines.push(line),
  }));
  const tokens = () => consoleCalls(origin.base, { admin: secrets.adminToken, change: secrets.changeToken });
  const asSession = (token: string) => {
    const calls = consoleCalls(origin.base, {});
    const headers = { headers: { [HEADER_CONSOLE_SESSION]: token } };
    return {
      get: (path: string) => calls.get(path, headers),
      post: (path: string, body: unknown) => calls.post(path, body, headers),
    };
  };
  /** Why the origin refused a request: the reason its log line names (the wire says only 401). */
  const reasonOf = (response: TestResponse): unknown => {
    const id = response.headers["x-request-id"];
    const line = logLines.find((each) => each.includes(`"request_id":"${id}"`) && each.includes('"route"'));
    return line ? JSON.parse(line).reason : undefined;
  };
  const alice = new SoftwarePasskey(RP_ID, ORIGIN);
  const bob = new SoftwarePasskey(RP_ID, ORIGIN);
  const keyIds = new Map<SoftwarePasskey, string>();
  const keyIdOf = (passkey: SoftwarePasskey): string => keyIds.get(passkey)!;
  let aliceSession: SessionStarted;
  let bobSession: SessionStarted;

  const registerAndEnroll = async (passkey: SoftwarePasskey, operator: string): Promise<void> => {
    const options = await tokens().post("/passkeys/registration/options", { operator });
    const creation = (options.body as { options: { challenge: string } }).options;
    const done = await tokens().post("/passkeys/registration", {
      operator,
      response: passkey.registrationResponse(creation.challenge),
    });
    expect(done.status).toBe(201);
    keyIds.set(passkey, (done.body as PasskeyView).key_id);
    const enrolled = await enrollPendingPasskey({
      db: stack.db.handle.db,
      client: stack.signer,
      policySecret: stack.enclave.policySecret,
      id: passkey.credentialId,
      announce: () => undefined,
    });
    expect(enrolled.ok).toBe(true);
  };
  const signIn = async (passkey: SoftwarePasskey): Promise<TestResponse> => {
    const options = await send(`${origin.base}/admin/agents/session/options`, { method: "POST", body: "{}" });
    const { challenge } = (options.body as { options: { challenge: string } }).options;
    return send(`${origin.base}/admin/agents/session`, {
      method: "POST",
      body: JSON.stringify({ response: authenticationResponse(passkey, challenge) }),
    });
  };
  const signedIn = async (passkey: SoftwarePasskey): Promise<SessionStarted> => {
    const answer = await signIn(passkey);
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    const session = answer.body as SessionStarted;
    recordSecret(session.token);
    return session;
  };
  const unfreezeOptions = async (passkey: SoftwarePasskey): Promise<TestResponse> =>
    tokens().post("/approvals/options", { target: { change: "unfreeze" }, key_id: keyIdOf(passkey) });
  const approveUnfreeze = async (passkey: SoftwarePasskey, options: ApprovalOptions) =>
    tokens().post("/approvals", {
      target: { change: "unfreeze" },
      key_id: keyIdOf(passkey),
      counter: options.counter,
      expires_at: options.expires_at,
      response: authenticationResponse(passkey, options.challenge),
    });

  it("an enrolled passkey approves, and signs its operator in", async () => {
    await registerAndEnroll(alice, "Alice Martin");
    await registerAndEnroll(bob, "Bob Osei");
    const prepared = await unfreezeOptions(alice);
    expect(prepared.status).toBe(200);
    const approved = await approveUnfreeze(alice, prepared.body as ApprovalOptions);
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    aliceSession = await signedIn(alice);
    bobSession = await signedIn(bob);
    expect((await asSession(aliceSession.token).get("/session")).body).toMatchObject({
      operator: "Alice Martin",
    });
  });

  it("revoked through the console (under Bob's session, with a reason): the next approval is refused by name, and an approval prepared before, sent straight to the enclave past the origin's check, is refused by the enclave as passkey_revoked", async () => {
    // Prepared while the passkey was good: what a compromised origin would hold and relay later.
    const prepared = (await unfreezeOptions(alice)).body as ApprovalOptions;
    const revoked = await asSession(bobSession.token).post(`/passkeys/${keyIdOf(alice)}/revoke`, {
      reason: "laptop stolen",
    });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect(revoked.body).toMatchObject({
      key_id: keyIdOf(alice),
      operator: "Alice Martin",
      enrolled: true,
      revoked_reason: "laptop stolen",
    });
    const revokedAt = (revoked.body as PasskeyView).revoked_at;
    expect(revokedAt).not.toBeNull();

    const options = await unfreezeOptions(alice);
    expect({ status: options.status, body: options.body }).toMatchObject({
      status: 403,
      body: { error: { code: "policy_loosening_requires_operator", detail: "passkey_revoked" } },
    });
    const relayed = await approveUnfreeze(alice, prepared);
    expect(relayed.status).toBe(403);
    expect(relayed.body).toMatchObject({ error: { detail: "passkey_revoked" } });
    const straight = await stack.signer.setNodeFrozen(
      {
        frozen: false,
        freezeEpoch: (prepared.shown as { freeze_epoch: number }).freeze_epoch,
        operator: alice.approval(
          keyIdOf(alice),
          prepared.counter,
          prepared.expires_at,
          Buffer.from(prepared.challenge, "base64url"),
        ),
      },
      stack.authorities.admin,
    );
    expect(straight.ok ? "approved" : { code: straight.error.code, detail: straight.error.detail }).toEqual({
      code: "capability_rejected",
      detail: "passkey_revoked",
    });
    // Bob's passkey, untouched, still approves.
    const bobs = await unfreezeOptions(bob);
    expect((await approveUnfreeze(bob, bobs.body as ApprovalOptions)).status).toBe(200);

    // Revoking again changes nothing: the first revocation is answered as it was.
    const again = await tokens().post(`/passkeys/${keyIdOf(alice)}/revoke`, { reason: "again" });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(revoked.body);
    const listed = (await tokens().get("/passkeys")).body as { passkeys: PasskeyView[] };
    expect(listed.passkeys.find((each) => each.key_id === keyIdOf(alice))).toEqual(revoked.body);
    expect(listed.passkeys.find((each) => each.key_id === keyIdOf(bob))).toMatchObject({ revoked_at: null });
  });

  it("the revocation is audited once, naming whose passkey, why, and who revoked it", async () => {
    const audit = auditSchema.parse((await tokens().get("/audit")).body);
    const revocations = audit.changes.filter((change) => change.kind === "passkey_revocation");
    expect(revocations).toEqual([
      expect.objectContaining({
        subject: keyIdOf(alice),
        change: "revoke",
        before: "enrolled",
        after: "revoked (Alice Martin's passkey)",
        reason: "laptop stolen",
        source: "console",
        operator: "Bob Osei",
        passkey_key_id: keyIdOf(bob),
      }),
    ]);
  });

  it("a revoked passkey signs no one in, and the session it signed in ends at its next request", async () => {
    const ended = await asSession(aliceSession.token).get("/session");
    expect(ended.status).toBe(401);
    expect((await asSession(bobSession.token).get("/session")).status).toBe(200);
    const refused = await signIn(alice);
    expect(refused.status).toBe(401);
    expect(reasonOf(refused)).toBe("revoked");
  });

  it("a revoked passkey is never enrolled again: the enroll tool refuses it, and the enclave refuses it under the policy authority's own signature", async () => {
    const tool = await enrollPendingPasskey({
      db: stack.db.handle.db,
      client: stack.signer,
      policySecret: stack.enclave.policySecret,
      id: keyIdOf(alice),
      announce: () => undefined,
    });
    expect(tool.ok ? "enrolled" : tool.error.code).toBe("revoked");
    const identity = await stack.signer.getSealedIdentity();
    if (!identity.ok) throw new Error("get_sealed_identity");
    const direct = await stack.signer.enrollOperatorPasskey(
      {
        keyId: keyIdOf(alice),
        operator: "Alice Martin",
        credentialId: alice.credentialId,
        publicKey: alice.publicKey,
        rpId: RP_ID,
        origin: ORIGIN,
      },
      minterFor(stack.signer, identity.value, stack.enclave.policySecret, "test"),
    );
    expect(direct.ok ? "enrolled" : direct.error.code).toBe("malformed");
    const sealed = await stack.signer.getPolicy();
    if (!sealed.ok) throw new Error("get_policy");
    expect(sealed.value.operatorPasskeys.map((each) => each.keyId)).toEqual([keyIdOf(bob)]);
  });

  it("the route takes a reason and a registered key id: no reason is 400, an unknown key id 404, and nothing is revoked", async () => {
    const noReason = await tokens().post(`/passkeys/${keyIdOf(bob)}/revoke`, { reason: " " });
    expect(noReason.status).toBe(400);
    const unknown = await tokens().post("/passkeys/pk-0000000000000000/revoke", { reason: "lost" });
    expect(unknown.status).toBe(404);
    // Without the change credentials (the read token alone), refused.
    const readOnly = await consoleCalls(origin.base, { admin: secrets.adminToken }).post(
      `/passkeys/${keyIdOf(bob)}/revoke`,
      { reason: "lost" },
    );
    expect(readOnly.status).toBe(401);
    const listed = (await tokens().get("/passkeys")).body as { passkeys: PasskeyView[] };
    expect(listed.passkeys.find((each) => each.key_id === keyIdOf(bob))).toMatchObject({ revoked_at: null });
  });

  it("a passkey the database has enrolled but the enclave does not hold (an enclave restored from an older backup) is still revoked: its sign-ins and sessions end", async () => {
    const carol = new SoftwarePasskey(RP_ID, ORIGIN);
    const options = await tokens().post("/passkeys/registration/options", { operator: "Carol Diaz" });
    const creation = (options.body as { options: { challenge: string } }).options;
    const done = await tokens().post("/passkeys/registration", {
      operator: "Carol Diaz",
      response: carol.registrationResponse(creation.challenge),
    });
    const keyId = (done.body as PasskeyView).key_id;
    // Enrolled as the database remembers it; the enclave never sealed it.
    await markEnrolled(stack.db.handle.db, carol.credentialId);
    const session = await signedIn(carol);
    const revoked = await tokens().post(`/passkeys/${keyId}/revoke`, { reason: "device lost" });
    expect({ status: revoked.status, body: revoked.body }).toMatchObject({
      status: 200,
      body: { key_id: keyId, enrolled: true, revoked_reason: "device lost" },
    });
    expect((await asSession(session.token).get("/session")).status).toBe(401);
    expect((await signIn(carol)).status).toBe(401);
  });

  it("a passkey revoked while pending and enrolled in the enclave meanwhile (an enroll that read the row just before) is revoked there by sending the revoke again", async () => {
    const dave = new SoftwarePasskey(RP_ID, ORIGIN);
    const options = await tokens().post("/passkeys/registration/options", { operator: "Dave Kim" });
    const creation = (options.body as { options: { challenge: string } }).options;
    const done = await tokens().post("/passkeys/registration", {
      operator: "Dave Kim",
      response: dave.registrationResponse(creation.challenge),
    });
    const keyId = (done.body as PasskeyView).key_id;
    const first = await tokens().post(`/passkeys/${keyId}/revoke`, { reason: "never used" });
    expect(first.body).toMatchObject({ enrolled: false, revoked_reason: "never used" });
    // The policy authority's enroll, begun before the revoke, seals it now.
    const identity = await stack.signer.getSealedIdentity();
    if (!identity.ok) throw new Error("get_sealed_identity");
    const enrolled = await stack.signer.enrollOperatorPasskey(
      {
        keyId,
        operator: "Dave Kim",
        credentialId: dave.credentialId,
        publicKey: dave.publicKey,
        rpId: RP_ID,
        origin: ORIGIN,
      },
      minterFor(stack.signer, identity.value, stack.enclave.policySecret, "test"),
    );
    expect(enrolled.ok).toBe(true);
    const again = await tokens().post(`/passkeys/${keyId}/revoke`, { reason: "again" });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const sealed = await stack.signer.getPolicy();
    if (!sealed.ok) throw new Error("get_policy");
    expect(sealed.value.operatorPasskeys.map((each) => each.keyId)).not.toContain(keyId);
  });

  it("the operator command revokes a passkey with the node's admin key (exit 0, audited from the cli, refused by the enclave from then on); run again it says so and changes nothing; an unknown key id is exit 1", async () => {
    const dir = await mkdtemp(join(tmpdir(), "revoke-passkey-"));
    try {
      const adminKeyFile = join(dir, "admin-authority.key");
      await writeFile(adminKeyFile, `${Buffer.from(stack.enclave.adminSecret).toString("hex")}\n`, {
        mode: 0o600,
      });
      const revoke = (keyId: string) =>
        runTool("ops/enclave-policy.ts", ["revoke-passkey", keyId, "--reason", "phone lost"], {
          env: stack.processEnv({ AGENT_ADMIN_AUTHORITY_KEY_FILE: adminKeyFile, LOG_LEVEL: "silent" }),
        });
      const first = await revoke(keyIdOf(bob));
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout).toBe(
        `passkey ${keyIdOf(bob)} of Bob Osei revoked: it approves nothing, signs no one in, its sessions end, and it is never enrolled again\n`,
      );
      const options = await unfreezeOptions(bob);
      expect(options.body).toMatchObject({ error: { detail: "passkey_revoked" } });
      const audit = auditSchema.parse((await tokens().get("/audit")).body);
      expect(audit.changes).toContainEqual(
        expect.objectContaining({
          kind: "passkey_revocation",
          subject: keyIdOf(bob),
          reason: "phone lost",
          source: "cli",
          operator: null,
        }),
      );
      expect((await asSession(bobSession.token).get("/session")).status).toBe(401);
      const again = await revoke(keyIdOf(bob));
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain("was revoked already");
      const unknown = await revoke("pk-0000000000000000");
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain("no registered passkey pk-0000000000000000");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
