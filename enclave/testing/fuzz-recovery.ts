/**
 * The recovery side of the socket fuzz's world (fuzz-world.ts), for restore_backup and
 * load_recovery_key under the recovery tier's own capability:
 * - a backup of a batch this enclave never held, exported by a donor enclave of the same
 *   environment and authorities (as a drill's throwaway enclave or a recovery's new one is given
 *   the live enclave's backups);
 * - a restore session of this enclave: a transport key it offered, its recovery key loaded under
 *   that key, restore packages sealed to it by the operator's offline tool, and boxes for
 *   load_recovery_key, one holding this enclave's recovery key and others that must be refused.
 * The enclave holds a transport key and the loaded recovery key an hour at most, and forgets a
 * transport key once 32 newer ones were asked for (new_transport_key needs no capability, and the
 * fuzz asks it a thousand times), so the fuzz opens a session right before the ops that use one.
 */

import { reencryptForTransport } from "../../ops/lib/reencrypt-envelope.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import { fromHex, toHex } from "../../shared/hex.ts";
import {
  hpkeSeal,
  RECOVERY_KEY_HPKE_INFO,
  randomX25519PrivateKey,
  recoveryKeyAad,
  x25519PublicKey,
} from "../../shared/recovery-envelope.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../../testing/enclave-process.ts";
import type { AgentKey } from "./agent-policy.ts";
import { privileged } from "./capabilities.ts";
import { expectOk, RawEnclaveClient } from "./raw-client.ts";

/** A backup envelope as export_backup wrote it, and the batch it holds. */
export type Backup = { batch_id: string; namespace: string; keys: AgentKey[]; envelope: Uint8Array };

/** load_recovery_key's params. */
export type KeyBox = { transport_public_key: string; enc: string; ct: string };

export type RecoverySession = {
  /** Boxes for load_recovery_key; `genuine` when one holds this enclave's recovery key, sealed as the loader seals it. */
  keyBoxes: { params: KeyBox; genuine: boolean }[];
  /** Restore packages of each backup to the session's transport key, and one to a key never offered. */
  packages: Uint8Array[];
};

/** The backup of a two-key batch made by a donor enclave of `fixture`'s environment and authorities. */
export async function donorBackup(fixture: EnclaveFixture): Promise<Backup> {
  const donor = await createEnclaveFixture({ envId: fixture.envId, keys: fixture });
  const { client } = await RawEnclaveClient.connect(donor.socketPath);
  try {
    const batch = { batch_id: "fuzz-donor", namespace: "agent-transfer" };
    const made = await privileged(client, donor, "generate_keys", { ...batch, count: 2 });
    const keys = made.keys as AgentKey[];
    const exported = await privileged(client, donor, "export_backup", {
      batch_id: batch.batch_id,
      key_refs: keys.map((key) => key.key_ref),
    });
    return { ...batch, keys, envelope: new Uint8Array(exported.envelope as Uint8Array) };
  } finally {
    client.close();
    await donor.dispose();
  }
}

/** `secret` sealed to `transport` as load_recovery_key takes it, its associated data naming `named`. */
async function keyBox(transport: Uint8Array, named: Uint8Array, secret: Uint8Array): Promise<KeyBox> {
  const box = await hpkeSeal(transport, RECOVERY_KEY_HPKE_INFO, recoveryKeyAad(transport, named), secret);
  return { transport_public_key: toHex(transport), enc: toHex(box.enc), ct: toHex(box.ct) };
}

/** Opens a restore session of the enclave behind `client` (see the module's comment). */
export async function openRecoverySession(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
  backups: Backup[],
): Promise<RecoverySession> {
  const offered = expectOk(await client.request("new_transport_key", {}));
  const transport = fromHex(offered.transport_public_key as string);
  const neverOffered = x25519PublicKey(randomX25519PrivateKey());
  const recoveryKey = fixture.recoveryEncKey;
  const recoveryPublicKey = x25519PublicKey(recoveryKey);
  const genuine = await keyBox(transport, recoveryPublicKey, recoveryKey);
  await privileged(client, fixture, "load_recovery_key", genuine);
  const keyBoxes = [
    { params: genuine, genuine: true },
    { params: await keyBox(transport, recoveryPublicKey, randomX25519PrivateKey()), genuine: false },
    {
      params: await keyBox(transport, x25519PublicKey(randomX25519PrivateKey()), recoveryKey),
      genuine: false,
    },
    { params: await keyBox(neverOffered, recoveryPublicKey, recoveryKey), genuine: false },
  ];
  const packageOf = async (backup: Backup, transportPublicKey: Uint8Array): Promise<Uint8Array> => {
    const made = await reencryptForTransport({
      envelope: backup.envelope,
      recoveryPrivateKey: recoveryKey,
      expect: { envId: fixture.envId, chainId: CHAIN_ID },
      transportPublicKey,
    });
    if (!made.ok) throw new Error(`restore package of ${backup.batch_id}: ${made.error.reason}`);
    return made.value.package;
  };
  const packages = await Promise.all(backups.map((backup) => packageOf(backup, transport)));
  packages.push(await packageOf(backups[backups.length - 1]!, neverOffered));
  return { keyBoxes, packages };
}
