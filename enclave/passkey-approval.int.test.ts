import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID } from "../shared/constants.ts";
import { heldActionSubject, nodeFreezeSubject, operatorApprovalToWire } from "../shared/operator-approval.ts";
import {
  freezeShown,
  heldShown,
  type PasskeyShown,
  passkeyChallenge,
  policyShown,
} from "../shared/passkey-approval.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { type AssertionOptions, FLAG_UP, SoftwarePasskey } from "../testing/software-passkey.ts";
import {
  type AgentKey,
  agentKeys,
  enrolledOperator,
  nodePolicy,
  outcome,
  RECIPIENT,
  transfer,
} from "./testing/agent-policy.ts";
import { instanceIdOf, mintFor, privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// Issue 43, the passkey checks: an operator's passkey, sealed only with the policy authority's
// signature, approves exactly what the console showed, and the enclave refuses an assertion moved
// to another action, replayed, without user verification, with a high-S signature, or from an
// authenticator never enrolled: each by its own name. Assertions come from a software
// authenticator speaking the WebAuthn protocol (testing/software-passkey.ts).

const RP_ID = "localhost";
const ORIGIN = "http://localhost:8080";
const KEY_ID = "alice-passkey";

describe("passkey approvals in the enclave (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let keys: AgentKey[];
  let instanceId: string;
  const alice = new SoftwarePasskey(RP_ID, ORIGIN);
  const counting = new SoftwarePasskey(RP_ID, ORIGIN);
  const countingChange = (signCount: number) => ({
    passkey: counting,
    keyId: "counting",
    assertion: { signCount },
  });
  let counter = Date.now();

  const enrollParams = (passkey: SoftwarePasskey, keyId: string) => ({
    key_id: keyId,
    operator: "Alice Martin",
    credential_id: passkey.credentialId,
    public_key: passkey.publicKey,
    rp_id: passkey.rpId,
    origin: passkey.origin,
  });
  /** A wire approval by `passkey` of `shown`; `change` alters what is signed or how. */
  const approve = async (
    shown: PasskeyShown,
    change: {
      passkey?: SoftwarePasskey;
      keyId?: string;
      counter?: number;
      assertion?: AssertionOptions;
    } = {},
  ) => {
    const keyId = change.keyId ?? KEY_ID;
    const used = change.counter ?? ++counter;
    const expiresAt = Math.floor(Date.now() / 1000) + 300;
    const challenge = passkeyChallenge({
      envId: fixture.envId,
      chainId: CHAIN_ID,
      instanceId,
      keyId,
      counter: used,
      expiresAt,
      shown,
    });
    const passkey = change.passkey ?? alice;
    return operatorApprovalToWire(passkey.approval(keyId, used, expiresAt, challenge, change.assertion));
  };
  const admin = async (
    op: "approve_held" | "set_node_frozen" | "set_agent_policy" | "revoke_operator_passkey",
    params: object,
  ) => {
    const record = params as Record<string, unknown>;
    return client.request(op, record, await mintFor(client, fixture, op, record));
  };
  type Action = { ref: string; to: string; value: bigint };
  const heldParams = (key: AgentKey, action: Action, expiresAt: number, operator: unknown) => ({
    key_ref: key.key_ref,
    kind: "transfer",
    ref: action.ref,
    to: action.to,
    value_units: action.value.toString(),
    expires_at: expiresAt,
    operator,
  });
  /** approve_held of `action`, the passkey having been shown `signedFor`. */
  const approveHeld = async (
    key: AgentKey,
    action: Action,
    signedFor: Action = action,
    change: Parameters<typeof approve>[1] = {},
  ) => {
    const expiresAt = Math.floor(Date.now() / 1000) + 3600;
    const shown = heldShown(
      {
        keyRef: key.key_ref,
        kind: "transfer",
        ref: signedFor.ref,
        to: signedFor.to,
        valueUnits: signedFor.value,
      },
      expiresAt,
    );
    const params = heldParams(key, action, expiresAt, await approve(shown, change));
    return { params, response: await admin("approve_held", params) };
  };
  const newAction = (value = 5000n): Action => ({ ref: randomUUID(), to: RECIPIENT, value });
  /** The node's freeze epoch the enclave holds now (get_policy). */
  const freezeEpoch = async () =>
    expectOk(await client.request("get_policy", {})).node_freeze_epoch as number;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "passkeys" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    await privileged(client, fixture, "configure_policy", nodePolicy());
    keys = await agentKeys(client, fixture, 3);
    instanceId = await instanceIdOf(client);
    await privileged(client, fixture, "enroll_operator_passkey", enrollParams(alice, KEY_ID));
    for (const key of keys) {
      expectOk(
        await admin("set_agent_policy", { key_ref: key.key_ref, policy: { approval_above_units: "1000" } }),
      );
    }
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("enrollment needs the policy authority's signature over the credential: admin-signed, unsigned, or with a key swapped after signing, it is refused and nothing is enrolled", async () => {
    const mallory = new SoftwarePasskey(RP_ID, ORIGIN);
    const params = enrollParams(mallory, "mallory-passkey");
    const adminSigned = await mintFor(client, fixture, "enroll_operator_passkey", params, {
      secret: fixture.adminSecret,
    });
    expect(outcome(await client.request("enroll_operator_passkey", params, adminSigned))).toEqual({
      code: "capability_rejected",
    });
    expect(outcome(await client.request("enroll_operator_passkey", params))).toMatchObject({
      code: "capability_rejected",
    });
    // The policy authority signed alice's credential; the origin relays mallory's key under it.
    const signed = enrollParams(alice, "mallory-passkey");
    const cap = await mintFor(client, fixture, "enroll_operator_passkey", signed);
    expect(
      outcome(
        await client.request("enroll_operator_passkey", { ...signed, public_key: mallory.publicKey }, cap),
      ),
    ).toEqual({ code: "capability_rejected" });
    const listed = expectOk(await client.request("get_policy", {}));
    expect(listed.operator_passkeys).toEqual([
      {
        key_id: KEY_ID,
        operator: "Alice Martin",
        credential_id: alice.credentialId,
        public_key: alice.publicKey,
        rp_id: RP_ID,
        origin: ORIGIN,
        label: null,
      },
    ]);
  });

  it("an enrolled passkey approves a held transfer, which then signs once", async () => {
    const key = keys[0]!;
    const action = newAction();
    expect(
      outcome(await client.request("sign_transfer", transfer(key, 5000n, { action_id: action.ref }))),
    ).toEqual({ code: "cap_exceeded", detail: "policy_held", rule: "approval_above_units" });
    const approved = await approveHeld(key, action);
    expect(expectOk(approved.response)).toEqual({
      approval: heldActionSubject({
        instanceId,
        keyRef: key.key_ref,
        kind: "transfer",
        ref: action.ref,
        to: RECIPIENT,
        valueUnits: 5000n,
      }),
    });
    expect(
      outcome(await client.request("sign_transfer", transfer(key, 5000n, { action_id: action.ref }))),
    ).toBe("signed");
    expect(
      outcome(await client.request("sign_transfer", transfer(key, 5000n, { action_id: action.ref }))),
    ).toEqual({ code: "cap_exceeded", detail: "policy_held", rule: "approval_above_units" });
  });

  it("an assertion moved to another action (another id, or more value) is passkey_challenge", async () => {
    const key = keys[1]!;
    const shownAction = newAction();
    expect(outcome((await approveHeld(key, newAction(), shownAction)).response)).toEqual({
      code: "capability_rejected",
      detail: "passkey_challenge",
    });
    expect(
      outcome((await approveHeld(key, { ...shownAction, value: 50_000n }, shownAction)).response),
    ).toEqual({
      code: "capability_rejected",
      detail: "passkey_challenge",
    });
  });

  it("a replayed assertion (same counter, fresh capability) is operator_replay", async () => {
    const key = keys[1]!;
    const first = await approveHeld(key, newAction());
    expectOk(first.response);
    expect(outcome(await admin("approve_held", first.params))).toEqual({
      code: "capability_rejected",
      detail: "operator_replay",
    });
  });

  it("an assertion without user verification (UV cleared, re-signed) is passkey_user_verification", async () => {
    const { response } = await approveHeld(keys[1]!, newAction(), undefined, {
      assertion: { flags: FLAG_UP },
    });
    expect(outcome(response)).toEqual({ code: "capability_rejected", detail: "passkey_user_verification" });
  });

  it("a high-S signature (n − s of a valid one, still valid ECDSA) is passkey_signature_high_s", async () => {
    const { response } = await approveHeld(keys[1]!, newAction(), undefined, { assertion: { s: "high" } });
    expect(outcome(response)).toEqual({ code: "capability_rejected", detail: "passkey_signature_high_s" });
  });

  it("an authenticator never enrolled is passkey_unknown under its own id, passkey_signature under an enrolled one", async () => {
    const stranger = new SoftwarePasskey(RP_ID, ORIGIN);
    const own = await approveHeld(keys[1]!, newAction(), undefined, { passkey: stranger, keyId: "stranger" });
    expect(outcome(own.response)).toEqual({ code: "capability_rejected", detail: "passkey_unknown" });
    const borrowed = await approveHeld(keys[1]!, newAction(), undefined, { passkey: stranger });
    expect(outcome(borrowed.response)).toEqual({ code: "capability_rejected", detail: "passkey_signature" });
  });

  it("another origin, a frame of another origin, another rpId or a registration's clientData is refused by name", async () => {
    const cases: [AssertionOptions, string][] = [
      [{ origin: "http://localhost:9999" }, "passkey_origin"],
      [{ crossOrigin: true }, "passkey_origin"],
      [{ rpId: "evil.example" }, "passkey_rp"],
      [{ type: "webauthn.create" }, "passkey_client_data"],
    ];
    for (const [assertion, detail] of cases) {
      const { response } = await approveHeld(keys[1]!, newAction(), undefined, { assertion });
      expect(outcome(response)).toEqual({ code: "capability_rejected", detail });
    }
  });

  it("a counting authenticator's signCount must grow: the same count again is passkey_sign_count", async () => {
    await privileged(client, fixture, "enroll_operator_passkey", enrollParams(counting, "counting"));
    const change = countingChange;
    expectOk((await approveHeld(keys[2]!, newAction(), undefined, change(5))).response);
    expect(outcome((await approveHeld(keys[2]!, newAction(), undefined, change(5))).response)).toEqual({
      code: "capability_rejected",
      detail: "passkey_sign_count",
    });
    expectOk((await approveHeld(keys[2]!, newAction(), undefined, change(6))).response);
  });

  it("a loosening is approved over the policy before and after; an assertion shown another 'before' is passkey_challenge", async () => {
    const key = keys[2]!;
    const before = { approval_above_units: "1000" };
    const after = { approval_above_units: "9000" };
    const lied = await approve(policyShown(key.key_ref, null, after));
    expect(
      outcome(await admin("set_agent_policy", { key_ref: key.key_ref, policy: after, operator: lied })),
    ).toEqual({ code: "capability_rejected", detail: "passkey_challenge" });
    const honest = await approve(policyShown(key.key_ref, before, after));
    expect(
      expectOk(await admin("set_agent_policy", { key_ref: key.key_ref, policy: after, operator: honest })),
    ).toMatchObject({ policy: after });
  });

  it("unfreezing the node takes a passkey's approval of frozen false over the freeze holding", async () => {
    expectOk(await admin("set_node_frozen", { frozen: true }));
    const epoch = await freezeEpoch();
    const wrong = await approve(freezeShown(true, epoch));
    expect(
      outcome(await admin("set_node_frozen", { frozen: false, freeze_epoch: epoch, operator: wrong })),
    ).toEqual({ code: "capability_rejected", detail: "passkey_challenge" });
    // Shown one freeze, relayed as naming another: the challenge is not this change's.
    const moved = await approve(freezeShown(false, epoch + 1));
    expect(
      outcome(await admin("set_node_frozen", { frozen: false, freeze_epoch: epoch, operator: moved })),
    ).toEqual({ code: "capability_rejected", detail: "passkey_challenge" });
    const right = await approve(freezeShown(false, epoch));
    expect(
      expectOk(await admin("set_node_frozen", { frozen: false, freeze_epoch: epoch, operator: right })),
    ).toEqual({ frozen: false });
  });

  it("a passkey's unfreeze held back while another operator lifted the freeze does not lift a freeze put on since: operator_policy_changed, the new freeze stands", async () => {
    const bob = await enrolledOperator(client, fixture, "bob");
    expectOk(await admin("set_node_frozen", { frozen: true }));
    const first = await freezeEpoch();
    // Alice's passkey approves lifting this freeze; the compromised origin keeps it back.
    const heldBack = {
      frozen: false,
      freeze_epoch: first,
      operator: await approve(freezeShown(false, first)),
    };
    // Bob lifts it with his operator key; later an incident freeze (the admin capability alone).
    expectOk(
      await admin("set_node_frozen", {
        frozen: false,
        freeze_epoch: first,
        operator: await bob.approve("set_node_frozen", nodeFreezeSubject(false, first)),
      }),
    );
    expectOk(await admin("set_node_frozen", { frozen: true }));
    const sent = outcome(await admin("set_node_frozen", heldBack));
    const sealed = expectOk(await client.request("get_policy", {}));
    expect(sealed.node_frozen, "the enclave lifted the incident freeze with an unfreeze held back").toBe(
      true,
    );
    expect(sent).toEqual({ code: "capability_rejected", detail: "operator_policy_changed" });
    // Shown the freeze holding now, the passkey lifts it.
    const now = await freezeEpoch();
    expect(now).toBe(first + 1);
    expect(
      expectOk(
        await admin("set_node_frozen", {
          frozen: false,
          freeze_epoch: now,
          operator: await approve(freezeShown(false, now)),
        }),
      ),
    ).toEqual({ frozen: false });
  });

  it("keeps the passkey, its counter and signCount across a kill and a start", async () => {
    const key = keys[1]!;
    const approved = await approveHeld(key, newAction());
    expectOk(approved.response);
    client.close();
    await fixture.kill();
    await fixture.start();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    expect(outcome(await admin("approve_held", approved.params))).toMatchObject({
      detail: "operator_replay",
    });
    expect(
      outcome((await approveHeld(key, newAction(), undefined, countingChange(6))).response),
    ).toMatchObject({
      detail: "passkey_sign_count",
    });
    expectOk((await approveHeld(key, newAction(), undefined, countingChange(7))).response);
    expect(expectOk(await client.request("get_policy", {})).operator_passkeys).toHaveLength(2);
  });

  it("a revoked passkey approves nothing: under the admin capability alone it is revoked, its next assertion is passkey_revoked, and a second revoke answers as the first", async () => {
    const lost = new SoftwarePasskey(RP_ID, ORIGIN);
    await privileged(client, fixture, "enroll_operator_passkey", enrollParams(lost, "lost-passkey"));
    const change = { passkey: lost, keyId: "lost-passkey" };
    expectOk((await approveHeld(keys[0]!, newAction(), undefined, change)).response);
    const revoke = { key_id: "lost-passkey", credential_id: lost.credentialId };
    // The policy authority's key is not needed: revoking only tightens.
    const revoked = expectOk(await admin("revoke_operator_passkey", revoke));
    expect(revoked).toMatchObject({ ...revoke, operator: "Alice Martin" });
    expect(outcome((await approveHeld(keys[0]!, newAction(), undefined, change)).response)).toEqual({
      code: "capability_rejected",
      detail: "passkey_revoked",
    });
    expect(expectOk(await admin("revoke_operator_passkey", revoke))).toEqual(revoked);
    // Another credential under that id is not this passkey: nothing is revoked by mistake.
    expect(
      outcome(await admin("revoke_operator_passkey", { ...revoke, credential_id: alice.credentialId })),
    ).toMatchObject({ code: "malformed" });
    expect(
      outcome(await admin("revoke_operator_passkey", { key_id: KEY_ID, credential_id: lost.credentialId })),
    ).toMatchObject({ code: "malformed" });
    const listed = expectOk(await client.request("get_policy", {})).operator_passkeys as { key_id: string }[];
    expect(listed.map((passkey) => passkey.key_id)).not.toContain("lost-passkey");
    expectOk((await approveHeld(keys[0]!, newAction())).response);
  });

  it("a revoked passkey is never enrolled again, by its key id or its credential, even under the policy authority's signature", async () => {
    const stolen = new SoftwarePasskey(RP_ID, ORIGIN);
    await privileged(client, fixture, "enroll_operator_passkey", enrollParams(stolen, "stolen-passkey"));
    expectOk(
      await admin("revoke_operator_passkey", {
        key_id: "stolen-passkey",
        credential_id: stolen.credentialId,
      }),
    );
    const again = async (params: object, op = "enroll_operator_passkey" as const) => {
      const record = params as Record<string, unknown>;
      return outcome(await client.request(op, record, await mintFor(client, fixture, op, record)));
    };
    expect(await again(enrollParams(stolen, "stolen-passkey"))).toMatchObject({ code: "malformed" });
    expect(await again(enrollParams(stolen, "stolen-passkey-2"))).toMatchObject({ code: "malformed" });
    const keyParams = { key_id: "stolen-passkey", public_key: stolen.publicKey };
    const keyCap = await mintFor(client, fixture, "enroll_operator_key", keyParams);
    expect(outcome(await client.request("enroll_operator_key", keyParams, keyCap))).toMatchObject({
      code: "malformed",
    });
    const change = { passkey: stolen, keyId: "stolen-passkey" };
    expect(outcome((await approveHeld(keys[0]!, newAction(), undefined, change)).response)).toEqual({
      code: "capability_rejected",
      detail: "passkey_revoked",
    });
  });

  it("a revoke is sealed: across a kill and a start the passkey stays revoked and approves nothing", async () => {
    const lost = new SoftwarePasskey(RP_ID, ORIGIN);
    await privileged(client, fixture, "enroll_operator_passkey", enrollParams(lost, "lost-before-restart"));
    const revoked = expectOk(
      await admin("revoke_operator_passkey", {
        key_id: "lost-before-restart",
        credential_id: lost.credentialId,
      }),
    );
    client.close();
    await fixture.kill();
    await fixture.start();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    const change = { passkey: lost, keyId: "lost-before-restart" };
    expect(outcome((await approveHeld(keys[0]!, newAction(), undefined, change)).response)).toEqual({
      code: "capability_rejected",
      detail: "passkey_revoked",
    });
    expect(
      expectOk(
        await admin("revoke_operator_passkey", {
          key_id: "lost-before-restart",
          credential_id: lost.credentialId,
        }),
      ),
    ).toEqual(revoked);
  });
});
