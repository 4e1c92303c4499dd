/**
 * The local stack's money set-up: the faucet treasury funded from the operator
 * pool, and the restore drill run on every verified batch that has none yet, so the funding gate
 * opens honestly (docs/api.md, "The funding gate") rather than by an exception.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import type { Address } from "viem";
import { publicClientFor } from "../devnet/testing.ts";
import { readRecoveryKeyFile } from "../ops/lib/key-files.ts";
import { backupKey } from "../ops/lib/recovery.ts";
import { createRestoreDriller, pendingDrillBatches } from "../ops/lib/restore-driller.ts";
import type { Db } from "../origin/db/client.ts";
import { sweepIdentities } from "../origin/identity/sweep.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { payFromOperatorPool } from "./operator-pool.ts";

/** The treasury is topped up to this many units when it falls below a tenth of it. */
export const LOCAL_TREASURY_FLOAT_UNITS = 1_000_000_000n;

/** The x402 settler's gas float: 100 USDC pays some 100,000 settlements at local fees. */
export const LOCAL_SETTLER_FLOAT_UNITS = 100_000_000n;

/** Tops the faucet treasury up from the operator pool; returns the units sent (0 if none). */
export function fundLocalTreasury(devnetUrl: string, treasury: Address): Promise<bigint> {
  return topUpFromOperatorPool(devnetUrl, treasury, LOCAL_TREASURY_FLOAT_UNITS);
}

/** Tops the x402 settler's gas up from the operator pool; returns the units sent. */
export function fundLocalSettler(devnetUrl: string, settler: Address): Promise<bigint> {
  return topUpFromOperatorPool(devnetUrl, settler, LOCAL_SETTLER_FLOAT_UNITS);
}

/** Sends `address` up to `floatUnits` when it holds less than a tenth of it. */
async function topUpFromOperatorPool(
  devnetUrl: string,
  address: Address,
  floatUnits: bigint,
): Promise<bigint> {
  const balance = await publicClientFor(devnetUrl).getBalance({ address });
  const floatWei = floatUnits * WEI_PER_UNIT;
  if (balance * 10n >= floatWei) return 0n;
  await payFromOperatorPool(devnetUrl, address, floatWei - balance);
  return (floatWei - balance) / WEI_PER_UNIT;
}

/**
 * Drills every available batch without restore evidence (docs/operations.md, "Restore drills": each restored
 * from its recovery copy into one throwaway enclave, stopped and deleted afterwards), then proves the
 * identities that are due, with the local recovery keys (the local stack plays every role). Returns the
 * batches drilled.
 */
export async function drillAndProveLocally(params: {
  db: Db;
  socketPath: string;
  recoveryKeyFile: string;
  recoveryEncKeyFile: string;
  envId: string;
  onLine: (line: string) => void;
  /**
   * Given the drill's close as soon as it exists, for the stack's stop: a Ctrl-C during the drill
   * must not leave its throwaway folder behind (its sealing key and the keys it restored).
   */
  onDriller?: (close: () => Promise<void>) => void;
}): Promise<number> {
  const signer = createSignerClient({ endpoint: `unix://${params.socketPath}`, liveIdentityEnabled: true });
  try {
    const batches = await pendingDrillBatches(params.db);
    if (batches.length > 0) {
      const identity = await signer.getSealedIdentity();
      if (!identity.ok) throw new Error(`the enclave's identity: ${identity.error.code}`);
      const driller = createRestoreDriller({
        identity: identity.value,
        recoveryAuthority: { keyPath: params.recoveryKeyFile },
        recoveryEncryptionKey: await readRecoveryKeyFile(params.recoveryEncKeyFile),
      });
      params.onDriller?.(() => driller.close());
      try {
        for (const batchId of batches) {
          const drilled = await driller.drill(params.db, batchId);
          if (!drilled.ok) throw new Error(`restore drill of batch ${batchId} failed: ${drilled.error}`);
        }
      } finally {
        await driller.close();
      }
      params.onLine(
        `drill      ${batches.length} key batch(es) restored from the recovery key into a throwaway enclave and matched; evidence recorded`,
      );
    }
    await sweepIdentities(
      { db: params.db, signer, logger: pino({ level: "silent" }) },
      { envId: params.envId, windowSeconds: 3_600 },
    );
    return batches.length;
  } finally {
    await signer.close();
  }
}

/**
 * Backs up, once each, the keys the enclave makes outside any refill batch (docs/operations.md, "Backups"):
 * the faucet treasury's (configure_treasury), the x402 settler's (configure_settler) and the x402 payee's
 * (made at init). Without this a lost enclave would take the treasury's float, the settler's gas and the
 * payee's address (and what the demo was paid) with it.
 */
export async function backupLocalSealedKeys(params: {
  socketPath: string;
  adminKeyFile: string;
  backupDir: string;
  onLine: (line: string) => void;
}): Promise<void> {
  const signer = createSignerClient({ endpoint: `unix://${params.socketPath}`, liveIdentityEnabled: true });
  try {
    const sealed = await signer.getPolicy();
    if (!sealed.ok) return;
    const keys = [
      { label: "treasury", keyRef: sealed.value.treasury?.faucetKeyRef },
      { label: "settler", keyRef: sealed.value.settler?.settlerKeyRef },
      { label: "payee", keyRef: sealed.value.payee?.payeeKeyRef },
    ];
    for (const { label, keyRef } of keys) {
      if (!keyRef) continue;
      const identity = await signer.publicIdentity({ keyRef });
      if (!identity.ok) throw new Error(`${label} key: public_identity: ${identity.error.code}`);
      if (existsSync(path.join(params.backupDir, `${identity.value.batchId}.backup`))) continue;
      const backedUp = await backupKey({
        signer,
        adminAuthority: { keyPath: params.adminKeyFile },
        keyRef,
        backupDir: params.backupDir,
      });
      if (!backedUp.ok) throw new Error(`${label} backup failed: ${backedUp.error.message}`);
      params.onLine(`${label.padEnd(10)} key backed up to ${backedUp.value.path}`);
    }
  } finally {
    await signer.close();
  }
}
