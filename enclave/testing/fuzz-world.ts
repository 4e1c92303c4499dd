/**
 * The enclave the socket fuzz (../fuzz.int.test.ts) drives, set up as a node runs: a sealed policy
 * whose x402 pair pays the payee key, agent keys, a treasury with payout terms, a settler with two
 * settlements signed, an enrolled operator key, P-256 keys an operator could enroll, one backup
 * envelope of its own and one of a donor enclave, a restore session (fuzz-recovery.ts), and a spare
 * key in each of the faucet's, the settler's and the payee's namespaces, named by none. What
 * the fuzz's shapes (fuzz-shapes.ts) put in their requests and what its checks of signed answers
 * (fuzz-bounds.ts) hold them to both come from here.
 */
import { join } from "node:path";
import type { Address } from "viem";
import { generateOperatorKey, type OperatorKey, readOperatorKey } from "../../ops/lib/operator-key.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import { transferWithAuthorizationDigest } from "../../shared/eip712.ts";
import type { PrivilegedOp } from "../../shared/enclave-protocol.ts";
import { fromHex, type Hex, toHex } from "../../shared/hex.ts";
import { addressOfPublicKey, publicKeyOf, randomPrivateKey, signDigest } from "../../shared/secp256k1.ts";
import type { EnclaveFixture } from "../../testing/enclave-process.ts";
import { type AgentKey, agentKeys, nodePolicy } from "./agent-policy.ts";
import { instanceIdOf, privileged } from "./capabilities.ts";
import { type Backup, donorBackup, openRecoverySession, type RecoverySession } from "./fuzz-recovery.ts";
import { randomP256PublicKey } from "./p256-points.ts";
import { expectOk, type RawEnclaveClient } from "./raw-client.ts";

/** A settlement the settler key signed: its transaction, the payment's payer and payee, its nonce and fee. */
export type Settlement = { txHash: Hex; payer: Address; payee: string; nonce: string; maxFeeWei: bigint };

/** A secp256k1 key outside the enclave: an x402 payer, or a stranger signing in its name. */
export type OutsideKey = { privateKey: Uint8Array; address: Address };

export type FuzzWorld = {
  envId: string;
  instanceId: string;
  /** The sealed policy, as configure_policy was given it. */
  policy: Record<string, unknown> & { operator_pool: string; x402_pay_to: string };
  agents: AgentKey[];
  treasury: AgentKey;
  settler: AgentKey;
  payee: AgentKey;
  /** The faucet's sealed terms. */
  faucet: { payoutUnits: bigint; cooldownMs: number; dailyUnits: bigint; budgetUnits: bigint };
  payer: OutsideKey;
  stranger: OutsideKey;
  operator: { keyId: string; key: OperatorKey };
  /** An operator key the enclave never enrolled, signing under the enrolled key's id. */
  impostor: OperatorKey;
  /** P-256 public keys (0x04 ‖ X ‖ Y) an operator could enroll, the two above among them. */
  operatorPublicKeys: Hex[];
  /** The operator keys enrolled before the run, by key id: the operator's and OPERATOR_KEY_IDS.enrolled more. */
  enrolledOperatorKeys: Map<string, Hex>;
  /** The offline recovery encryption key every backup of this enclave is sealed to (the operator's). */
  recoveryEncryptionKey: Uint8Array;
  /** A backup of this enclave's, and one of a donor enclave's batch this one never held. */
  backup: Backup;
  donor: Backup;
  /** The restore session the recovery ops' cases use (openRecoverySession opens a new one). */
  recovery: RecoverySession;
  /** Settlements the settler key signed during set-up. */
  settlements: Settlement[];
  /** A key of each role's namespace that the role does not name: what the configure ops may point it at. */
  spares: Record<"faucet" | "settler" | "payee", AgentKey>;
  /** The sealed policy's version once set up (configure_policy counts from it). */
  policyVersion: number;
};

/** The roles a configure op names a key for, each in its own namespace. */
export type Role = keyof FuzzWorld["spares"];

export const FAUCET = {
  payoutUnits: 10_000_000n,
  // Longer than the fuzz runs: a recipient paid twice in one run is a broken cooldown.
  cooldownMs: 3_600_000,
  dailyUnits: 100_000_000n,
  // Four payouts and their fees: a run uses it up, so the budget is one of the bounds it meets.
  budgetUnits: 40_001_000n,
};

/**
 * The operator key ids the fuzz's cases use (`fuzz-op-0`…), of which `enrolled` are enrolled before
 * the run besides the operator's, and the passkeys' ids and credentials. The operator keys leave
 * the enclave room for 64 a few short, and the passkeys, fuzzed after them, use up the rest in
 * about half the runs of 1,000 cases (agent-policy.int.test.ts holds the room in every run).
 */
export const OPERATOR_KEY_IDS = { prefix: "fuzz-op-", count: 54, enrolled: 50 };
export const PASSKEY_IDS = { prefix: "fuzz-pk-", count: 24, credentials: 20 };

export function outsideKey(): OutsideKey {
  const privateKey = randomPrivateKey();
  return { privateKey, address: addressOfPublicKey(publicKeyOf(privateKey)) };
}

/** An x402 authorization as sign_settlement carries it, signed by `signer`. */
export function signedAuthorization(
  signer: OutsideKey,
  fields: { from: Address; to: string; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex },
): { authorization: Record<string, string>; signature: Hex } {
  const digest = transferWithAuthorizationDigest({ ...fields, to: fields.to as Address });
  return {
    authorization: {
      from: fields.from.toLowerCase(),
      to: fields.to.toLowerCase(),
      value: fields.value.toString(),
      valid_after: fields.validAfter.toString(),
      valid_before: fields.validBefore.toString(),
      nonce: fields.nonce,
    },
    signature: signDigest(fromHex(digest), signer.privateKey).signature,
  };
}

/** Sets the enclave at the other end of `client` up as the fuzz needs it (see the module's comment). */
export async function setUpFuzzWorld(client: RawEnclaveClient, fixture: EnclaveFixture): Promise<FuzzWorld> {
  const sealed = expectOk(await client.request("get_policy", {}));
  const named = sealed.payee as { payee_key_ref: string; payee_address: Address };
  const payee = { key_ref: named.payee_key_ref, address: named.payee_address };
  const policy = {
    ...nodePolicy({ maxUnits: "1000000", payees: null }),
    x402_pay_to: payee.address.toLowerCase(),
    operator_pool: "0x00000000000000000000000000000000000000aa",
    // Some fifty settlements at 100 units of fee: a run uses it up, as the faucet's budget.
    settler_daily_fee_units: "5000",
  };
  await privileged(client, fixture, "configure_policy", policy);
  const agents = await agentKeys(client, fixture, 8);
  const treasury = await privileged(client, fixture, "configure_treasury", {
    budget_units: FAUCET.budgetUnits.toString(),
    payout_units: FAUCET.payoutUnits.toString(),
    cooldown_ms: FAUCET.cooldownMs,
    daily_limit_units: FAUCET.dailyUnits.toString(),
  });
  const settler = await privileged(client, fixture, "configure_settler", {});
  const operatorFile = join(fixture.dir, "fuzz-operator.key");
  const impostorFile = join(fixture.dir, "fuzz-impostor.key");
  await generateOperatorKey(operatorFile);
  await generateOperatorKey(impostorFile);
  const operator = { keyId: "fuzz-operator", key: await readOperatorKey(operatorFile) };
  const impostor = await readOperatorKey(impostorFile);
  const operatorPublicKeys = [
    operator.key.publicKey,
    impostor.publicKey,
    ...Array.from({ length: 6 }, randomP256PublicKey),
  ];
  const enrolledOperatorKeys = new Map<string, Hex>([[operator.keyId, operator.key.publicKey]]);
  for (let index = 0; index < OPERATOR_KEY_IDS.enrolled; index++)
    enrolledOperatorKeys.set(`${OPERATOR_KEY_IDS.prefix}${index}`, operatorPublicKeys[2 + (index % 6)]!);
  for (const [keyId, publicKey] of enrolledOperatorKeys)
    await privileged(client, fixture, "enroll_operator_key", { key_id: keyId, public_key: publicKey });
  const backedUp = await privileged(client, fixture, "generate_keys", {
    namespace: "agent-transfer",
    count: 2,
    batch_id: "fuzz-backup",
  });
  const exported = await privileged(client, fixture, "export_backup", {
    batch_id: "fuzz-backup",
    key_refs: (backedUp.keys as AgentKey[]).map((key) => key.key_ref),
  });
  const backup: Backup = {
    batch_id: "fuzz-backup",
    namespace: "agent-transfer",
    keys: backedUp.keys as AgentKey[],
    envelope: new Uint8Array(exported.envelope as Uint8Array),
  };
  const donor = await donorBackup(fixture);
  const spare = async (namespace: Role): Promise<AgentKey> => {
    const made = await privileged(client, fixture, "generate_keys", {
      namespace,
      count: 1,
      batch_id: `fuzz-spare-${namespace}`,
    });
    return (made.keys as AgentKey[])[0]!;
  };
  const world: FuzzWorld = {
    envId: fixture.envId,
    instanceId: await instanceIdOf(client),
    policy,
    agents,
    treasury: { key_ref: treasury.faucet_key_ref as string, address: treasury.faucet_address as Address },
    settler: { key_ref: settler.settler_key_ref as string, address: settler.settler_address as Address },
    payee,
    faucet: FAUCET,
    payer: outsideKey(),
    stranger: outsideKey(),
    operator,
    impostor,
    operatorPublicKeys,
    enrolledOperatorKeys,
    recoveryEncryptionKey: fixture.recoveryEncKey,
    backup,
    donor,
    recovery: await openRecoverySession(client, fixture, [backup, donor]),
    settlements: [],
    spares: { faucet: await spare("faucet"), settler: await spare("settler"), payee: await spare("payee") },
    policyVersion: expectOk(await client.request("get_policy", {})).policy_version as number,
  };
  for (const nonce of [1, 2]) world.settlements.push(await settleOnce(client, world, nonce));
  return world;
}

/**
 * The configure ops that seal the world's terms again (its policy, its treasury with a full budget,
 * its settler and payee keys), for after a configure op's cases changed them.
 */
export function worldTerms(world: FuzzWorld): [PrivilegedOp, Record<string, unknown>][] {
  return [
    ["configure_policy", world.policy],
    [
      "configure_treasury",
      {
        faucet_key_ref: world.treasury.key_ref,
        budget_units: world.faucet.budgetUnits.toString(),
        payout_units: world.faucet.payoutUnits.toString(),
        cooldown_ms: world.faucet.cooldownMs,
        daily_limit_units: world.faucet.dailyUnits.toString(),
      },
    ],
    ["configure_settler", { settler_key_ref: world.settler.key_ref }],
    ["configure_payee", { payee_key_ref: world.payee.key_ref }],
  ];
}

/** A settlement of the sealed pair by the world's payer, signed by the settler key at `nonce`. */
async function settleOnce(client: RawEnclaveClient, world: FuzzWorld, nonce: number): Promise<Settlement> {
  const signed = signedAuthorization(world.payer, {
    from: world.payer.address,
    to: world.payee.address,
    value: BigInt(world.policy.x402_amount_units as string),
    validAfter: 0n,
    validBefore: BigInt(Math.floor(Date.now() / 1000) + 120),
    nonce: toHex(Uint8Array.from({ length: 32 }, (_, index) => (index === 31 ? nonce : 0xee))),
  });
  const gasLimit = 100_000n;
  const maxFeePerGas = 1_000_000_000n;
  const result = expectOk(
    await client.request("sign_settlement", {
      key_ref: world.settler.key_ref,
      chain_id: CHAIN_ID,
      ...signed,
      nonce: String(nonce),
      max_fee_per_gas: maxFeePerGas.toString(),
      max_priority_fee_per_gas: maxFeePerGas.toString(),
      gas_limit: gasLimit.toString(),
    }),
  );
  return {
    txHash: result.tx_hash as Hex,
    payer: world.payer.address,
    payee: world.payee.address.toLowerCase(),
    nonce: String(nonce),
    maxFeeWei: gasLimit * maxFeePerGas,
  };
}
