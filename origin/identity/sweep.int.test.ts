import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { fromHex } from "../../shared/hex.ts";
import { buildIdentityProofPreimage, identityProofDigest } from "../../shared/identity-proof.ts";
import { signDigest } from "../../shared/secp256k1.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { type FaultReply, startFaultEnclave } from "../../testing/fault-enclave.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { connectDatabase, queryRows } from "../db/client.ts";
import { refillOnce } from "../keypool/refill.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import type { SignerClient } from "../signer/types.ts";
import type { IdentitySigner } from "./prove.ts";
import { applyOutcome, sweepIdentities } from "./sweep.ts";

const logger = pino({ level: "silent" });
const ENV_ID = "sweep-test";

type Row = { enabled: boolean; disabled_reason: string | null; last_verified_at: Date | null };
type Finding = { class: string; code: string };

describe("identity sweep (docs/api.md#identities-keys-and-the-sweep)", () => {
  let testDb: TestDatabase;
  let enclave: EnclaveProcess;
  let live: SignerClient;
  let backupDir: string;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    enclave = await startEnclaveProcess({ envId: ENV_ID });
    live = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
    backupDir = await mkdtemp(path.join(tmpdir(), "sweep-backups-"));
  });
  afterEach(async () => {
    await testDb.handle.db.execute(
      sql`truncate identity_findings, agent_tokens, key_pool, key_batches, agent_identities cascade`,
    );
  });
  afterAll(async () => {
    await live?.close();
    await enclave?.dispose();
    await testDb?.drop();
    if (backupDir) await rm(backupDir, { recursive: true, force: true });
  });

  /** An identity whose key the real enclave generated, backed up and verified. */
  async function enclaveIdentity(): Promise<{ agentId: string; keyRef: string; wallet: string }> {
    const authorize = createCapabilityMinter({ authority: enclave.adminSecret, envId: ENV_ID, client: live });
    await refillOnce(
      { db: testDb.handle.db, signer: live, authorize, backupDir, logger },
      { target: 1, batchSize: 1 },
    );
    const result = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    return {
      agentId: result.agentId,
      keyRef: result.keyRef,
      wallet: result.assignedWallet,
    };
  }

  /** An identity over a key made here, so a fake enclave can answer for it. */
  async function seededIdentity() {
    const [key] = await seedFreeKeys(testDb.handle.db, 1);
    const result = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    return { agentId: result.agentId, key: key! };
  }

  const sweep = (signer: IdentitySigner, overrides: { envId?: string; chainId?: number } = {}) =>
    sweepIdentities(
      { db: testDb.handle.db, signer, logger },
      { envId: overrides.envId ?? ENV_ID, chainId: overrides.chainId, windowSeconds: 3600 },
    );
  const row = async (agentId: string): Promise<Row> =>
    (
      await queryRows<Row>(
        testDb.handle.db,
        sql`select enabled, disabled_reason, last_verified_at from agent_identities where agent_id = ${agentId}`,
      )
    )[0]!;
  const findings = (agentId: string) =>
    queryRows<Finding>(
      testDb.handle.db,
      sql`select class, code from identity_findings where agent_id = ${agentId} order by at`,
    );

  async function withFake(
    reply: (op: string, params: Record<string, unknown>) => FaultReply,
    body: (signer: IdentitySigner) => Promise<void>,
  ) {
    const fake = await startFaultEnclave(reply);
    const signer = createSignerClient({
      endpoint: fake.endpoint,
      liveIdentityEnabled: true,
      requestTimeoutMs: 2_000,
    });
    try {
      await body(signer);
    } finally {
      await signer.close();
      await fake.close();
    }
  }

  it("verifies a key the enclave holds and leaves it alone within the window", async () => {
    const identity = await enclaveIdentity();
    expect(await sweep(live)).toEqual({ checked: 1, verified: 1, disabled: 0, findings: 0 });
    const after = await row(identity.agentId);
    expect(after.enabled).toBe(true);
    expect(after.last_verified_at).not.toBeNull();
    expect(await findings(identity.agentId)).toEqual([]);
    expect((await sweep(live)).checked).toBe(0);
  });

  it("destructive: a stored wallet that is not the key's address disables the identity once", async () => {
    const identity = await enclaveIdentity();
    const other = `0x${randomBytes(20).toString("hex")}`;
    await testDb.handle.db.execute(
      sql`update agent_identities set assigned_wallet = ${other} where agent_id = ${identity.agentId}`,
    );
    expect(await sweep(live)).toMatchObject({ checked: 1, disabled: 1 });
    expect(await row(identity.agentId)).toMatchObject({
      enabled: false,
      disabled_reason: "identity proof: wallet_mismatch",
    });
    expect(await findings(identity.agentId)).toEqual([{ class: "destructive", code: "wallet_mismatch" }]);
    // A repeat is a no-op: not swept again, and applying the outcome again writes nothing.
    expect((await sweep(live)).checked).toBe(0);
    const again = await applyOutcome(testDb.handle.db, identity.agentId, {
      verified: false,
      class: "destructive",
      code: "wallet_mismatch",
      detail: "repeat",
    });
    expect(again).toBe("already_disabled");
    expect(await findings(identity.agentId)).toHaveLength(1);
  });

  it("destructive: a proof for another environment fails closed", async () => {
    const identity = await enclaveIdentity();
    await sweep(live, { envId: "prod-eu-1" });
    expect(await row(identity.agentId)).toMatchObject({
      enabled: false,
      disabled_reason: "identity proof: proof_failed",
    });
  });

  it("destructive: a wrong-but-in-range chain id under the live client disables the wallet", async () => {
    const identity = await enclaveIdentity();
    await sweep(live, { chainId: 78 });
    expect(await row(identity.agentId)).toMatchObject({ enabled: false });
    expect(await findings(identity.agentId)).toEqual([{ class: "destructive", code: "proof_failed" }]);
  });

  it("destructive (fake enclave): an answer for another key ref, and a forged proof", async () => {
    const first = await seededIdentity();
    await withFake(
      (op) =>
        op === "public_identity"
          ? {
              result: {
                key_ref: randomBytes(32).toString("hex"),
                public_key: privateKeyToAccount(first.key.privateKey).publicKey,
                address: first.key.address,
                namespace: "agent-transfer",
                batch_id: "fake-batch",
                env_id: ENV_ID,
                chain_id: 77,
              },
            }
          : { error: { code: "malformed" } },
      async (signer) => {
        await sweep(signer);
      },
    );
    expect(await findings(first.agentId)).toEqual([{ class: "destructive", code: "key_ref_mismatch" }]);
    await testDb.handle.db.execute(
      sql`truncate identity_findings, agent_tokens, key_pool, key_batches, agent_identities cascade`,
    );

    const second = await seededIdentity();
    const publicKey = privateKeyToAccount(second.key.privateKey).publicKey;
    const forger = randomBytes(32);
    await withFake(
      (op, params) => {
        const info = {
          key_ref: second.key.keyRef,
          public_key: publicKey,
          address: second.key.address,
          env_id: ENV_ID,
          chain_id: 77,
        };
        if (op === "public_identity") {
          return { result: { ...info, namespace: "agent-transfer", batch_id: "fake-batch" } };
        }
        const digest = identityProofDigest(
          buildIdentityProofPreimage({
            chainId: 77,
            envId: ENV_ID,
            keyRef: second.key.keyRef,
            publicKey: fromHex(publicKey),
            address: second.key.address,
            verifierNonce: String(params.verifier_nonce) as `0x${string}`,
          }),
        );
        return { result: { ...info, signature: signDigest(digest, forger).signature } };
      },
      async (signer) => {
        await sweep(signer);
      },
    );
    expect(await row(second.agentId)).toMatchObject({
      enabled: false,
      disabled_reason: "identity proof: proof_failed",
    });
  });

  it("destructive: a key ref the enclave holds no agent key under is a key-ref mismatch", async () => {
    const identity = await enclaveIdentity();
    await testDb.handle.db.execute(
      sql`update agent_identities set agent_transfer_key_ref = ${randomBytes(32).toString("hex")} where agent_id = ${identity.agentId}`,
    );
    expect(await sweep(live)).toMatchObject({ checked: 1, disabled: 1, findings: 1 });
    expect(await row(identity.agentId)).toMatchObject({
      enabled: false,
      disabled_reason: "identity proof: key_ref_mismatch",
    });
    expect(await findings(identity.agentId)).toEqual([{ class: "destructive", code: "key_ref_mismatch" }]);
  });

  it("two origins sweeping at once prove each identity once; one that stopped leaves the next sweep to the other", async () => {
    const identities = [];
    for (let i = 0; i < 8; i++) identities.push(await enclaveIdentity());
    // The other origin: its own pool and its own enclave client, on the same database and enclave.
    const otherDb = connectDatabase({ url: testDb.url, driver: "pg" });
    const otherSigner = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const otherSweep = () =>
      sweepIdentities(
        // Its lock on a connection outside its pool, as the origin holds it (identity/capability.ts).
        { db: otherDb.db, signer: otherSigner, logger, lockConnection: (work) => otherDb.unbounded(work) },
        { envId: ENV_ID, windowSeconds: 3600 },
      );
    try {
      await otherSigner.getSealedIdentity();
      const [one, other] = await Promise.all([sweep(live), otherSweep()]);
      // Mutation: without the sweep's lock both take the identities due and prove most of them
      // twice (13 and 15 proofs of 8, measured).
      expect(one.checked + other.checked).toBe(identities.length);
      expect(one.verified + other.verified).toBe(identities.length);
      for (const identity of identities)
        expect((await row(identity.agentId)).last_verified_at).not.toBeNull();
    } finally {
      await otherSigner.close();
      await otherDb.close();
    }
    // That origin is gone for good: an identity made since is this origin's to prove.
    const later = await enclaveIdentity();
    expect(await sweep(live)).toEqual({ checked: 1, verified: 1, disabled: 0, findings: 0 });
    expect((await row(later.agentId)).last_verified_at).not.toBeNull();
  });

  it("retryable: an enclave that cannot be reached records a finding every tick, wallet intact", async () => {
    const identity = await enclaveIdentity();
    const gone = createSignerClient({
      endpoint: `unix://${path.join(backupDir, "no-such.sock")}`,
      liveIdentityEnabled: true,
      connectTimeoutMs: 500,
      requestTimeoutMs: 1_000,
      backoff: { initialMs: 10, maxMs: 20 },
    });
    await sweep(gone);
    await sweep(gone);
    await gone.close();
    expect(await row(identity.agentId)).toMatchObject({ enabled: true, last_verified_at: null });
    expect(await findings(identity.agentId)).toEqual([
      { class: "retryable", code: "signer_unreachable" },
      { class: "retryable", code: "signer_unreachable" },
    ]);
  });

  it("terminal_wire: an enclave announcing another profile is refused, wallet intact", async () => {
    const identity = await enclaveIdentity();
    await enclave.start({ profile: "bridge_operator" });
    try {
      const client = createSignerClient({
        endpoint: `unix://${enclave.socketPath}`,
        liveIdentityEnabled: true,
      });
      await sweep(client);
      await sweep(client);
      await client.close();
    } finally {
      await enclave.start();
    }
    expect(await row(identity.agentId)).toMatchObject({ enabled: true });
    // A finding on every tick, not once: the identity stays due until a proof succeeds.
    expect((await findings(identity.agentId)).map((finding) => finding.class)).toEqual([
      "terminal_wire",
      "terminal_wire",
    ]);
  });

  it("terminal_config, terminal_agent and terminal_malformed (fake enclave): a finding every tick, wallet intact", async () => {
    const identity = await seededIdentity();
    const twoTicks = async (signer: IdentitySigner): Promise<void> => {
      await sweep(signer);
      await sweep(signer);
    };
    await withFake(() => ({ error: { code: "not_configured", reason: "policy is not sealed" } }), twoTicks);
    await withFake(() => ({ error: { code: "cap_exceeded", reason: "rate of proofs exceeded" } }), twoTicks);
    await withFake(() => ({ result: { key_ref: "not hex", chain_id: "seventy-seven" } }), twoTicks);
    expect(await row(identity.agentId)).toMatchObject({ enabled: true, last_verified_at: null });
    expect(await findings(identity.agentId)).toEqual([
      { class: "terminal_config", code: "not_configured" },
      { class: "terminal_config", code: "not_configured" },
      { class: "terminal_agent", code: "cap_exceeded" },
      { class: "terminal_agent", code: "cap_exceeded" },
      { class: "terminal_malformed", code: "malformed_reply" },
      { class: "terminal_malformed", code: "malformed_reply" },
    ]);
  });

  it("terminal_unknown: a proof that throws is a finding for that identity alone; the tick goes on to the rest", async () => {
    const failing = await enclaveIdentity();
    const healthy = await enclaveIdentity();
    // A fake for a fault the real client cannot be made to produce: its call throws (a bug, say)
    // for one key, instead of answering a failure. Everything else is the live enclave's.
    const throwing: IdentitySigner = {
      publicIdentity: async (params) => {
        if (params.keyRef === failing.keyRef) throw new TypeError("cannot read properties of undefined");
        return live.publicIdentity(params);
      },
      proveIdentity: live.proveIdentity,
    };
    expect(await sweep(throwing)).toEqual({ checked: 2, verified: 1, disabled: 0, findings: 1 });
    expect(await sweep(throwing)).toEqual({ checked: 1, verified: 0, disabled: 0, findings: 1 });
    expect(await row(failing.agentId)).toMatchObject({ enabled: true, last_verified_at: null });
    expect(await findings(failing.agentId)).toEqual([
      { class: "terminal_unknown", code: "unexpected_error" },
      { class: "terminal_unknown", code: "unexpected_error" },
    ]);
    expect((await row(healthy.agentId)).last_verified_at).not.toBeNull();
    expect(await findings(healthy.agentId)).toEqual([]);
  });

  it("takes the identities whose last attempt is oldest first: those that keep failing do not keep the rest from their proof", async () => {
    const failing = [await enclaveIdentity(), await enclaveIdentity()];
    const healthy = await enclaveIdentity();
    // Proved two hours ago, so due again; the failing two were never proved.
    await testDb.handle.db.execute(
      sql`update agent_identities set last_verified_at = now() - interval '2 hours' where agent_id = ${healthy.agentId}`,
    );
    // A fake for a fault the real client cannot be made to produce for some keys alone (as above).
    const throwing: IdentitySigner = {
      publicIdentity: async (params) => {
        if (failing.some((identity) => identity.keyRef === params.keyRef)) throw new TypeError("boom");
        return live.publicIdentity(params);
      },
      proveIdentity: live.proveIdentity,
    };
    const tick = () =>
      sweepIdentities(
        { db: testDb.handle.db, signer: throwing, logger },
        { envId: ENV_ID, windowSeconds: 3600, limit: 2 },
      );
    // Mutation: ordered by the last verification alone, the two failing identities fill every
    // tick and the healthy one is never proved again.
    expect(await tick()).toEqual({ checked: 2, verified: 0, disabled: 0, findings: 2 });
    expect(await tick()).toEqual({ checked: 2, verified: 1, disabled: 0, findings: 1 });
    const proved = new Date((await row(healthy.agentId)).last_verified_at!);
    expect(Date.now() - proved.getTime()).toBeLessThan(60_000);
    // One failing identity was tried again beside it; the other waits for the next tick.
    const tries = await Promise.all(
      failing.map(async (identity) => (await findings(identity.agentId)).length),
    );
    expect(tries.sort()).toEqual([1, 2]);
  });

  it("terminal_unknown: in dormant mode every identity gets a finding every tick and keeps its wallet", async () => {
    const first = await enclaveIdentity();
    const second = await enclaveIdentity();
    const dormant = createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: false,
    });
    expect(await sweep(dormant)).toMatchObject({ checked: 2, disabled: 0, findings: 2 });
    expect(await sweep(dormant)).toMatchObject({ checked: 2, disabled: 0, findings: 2 });
    await dormant.close();
    for (const identity of [first, second]) {
      expect(await row(identity.agentId)).toMatchObject({ enabled: true });
      expect(await findings(identity.agentId)).toEqual([
        { class: "terminal_unknown", code: "agent_signer_protocol_unavailable" },
        { class: "terminal_unknown", code: "agent_signer_protocol_unavailable" },
      ]);
    }
  });
});
