/**
 * Ending a stuck transaction sooner: replacing it at its nonce with a filler
 * (docs/architecture.md#who-decides-a-transactions-end). A transaction the chain has not mined stays
 * in flight until the sender's mined nonce passes it, and the chain mines a sender's transactions in
 * nonce order only, so a stuck one holds back every later one of its sender. When a node refused
 * it, or it has waited long enough, the tracker signs a filler at the same nonce: a transfer of
 * nothing from the sender to itself (the enclave's sign_filler: it can move no money), at a higher
 * fee than the stuck one, so that a node prefers it. Whichever of the two the chain mines decides:
 * the payment, which then confirms, or the filler, which ends the payment `failed`, nothing moved
 * (store.ts recordMined). A nonce is never handed out again and no payment is signed twice: the
 * filler is the only other transaction ever signed at that nonce (one per nonce, enforced by the
 * database and by the enclave).
 */

import { sql } from "drizzle-orm";
import { parseTransaction } from "viem";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { Hex } from "../../shared/hex.ts";
import { type FeeOracle, NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { type Db, queryRows } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { SignerClient } from "../signer/types.ts";
import { minedNonces } from "./chain-reads.ts";
import type { BroadcastLease } from "./intent.ts";
import { broadcastLeased } from "./sender.ts";
import type { OutboxStore } from "./store.ts";
import { recordFiller, resolveSenderKeys, type TrackerHooks } from "./tracker-hooks.ts";

export type FillerDeps = {
  db: Db;
  store: OutboxStore;
  /** The domains' key lookups and rows for a filler. */
  hooks: TrackerHooks;
  rpc: JsonRpcUpstream;
  logger: Logger;
  signer: Pick<SignerClient, "signFiller">;
  fees: FeeOracle;
  /** The service's own senders besides agent wallets, by lowercase address: the treasury, the settler. */
  serviceKeys: ReadonlyMap<string, string>;
  leaseMs: number;
  /** A transaction whose broadcasts were not refused is replaced once it has waited this long unmined. */
  replaceAfterMs: number;
  /**
   * The tracker's memory of the fillers the enclave refused under its sealed policy (by
   * `sender:nonce`, until when not to ask again): a budget spent today, a nonce it has no record of,
   * a filler it signed already whose bytes a crash lost. Asking again each second would only repeat
   * the refusal in the log.
   */
  refused: Map<string, number>;
};

/** How long a filler the enclave refused under its sealed policy is not asked for again. */
const REFUSED_FILLER_PAUSE_MS = 10 * 60_000;

type Stuck = { txId: string; sender: string; nonce: bigint; rawTx: string };

/**
 * Replaces the stuck transactions found now: in flight, broadcast at least once, with no filler at
 * their nonce yet, and either refused at their last broadcast or waiting longer than
 * `replaceAfterMs`; the chain's nonce for their sender not yet past them (once it is, the chain has
 * decided). Returns how many fillers a node accepted.
 */
export async function replaceStuck(deps: FillerDeps): Promise<number> {
  const now = Date.now();
  for (const [key, until] of deps.refused) if (until <= now) deps.refused.delete(key);
  const stuck = (await findStuck(deps.db, deps.replaceAfterMs)).filter(
    (tx) => !deps.refused.has(`${tx.sender}:${tx.nonce}`),
  );
  if (stuck.length === 0) return 0;
  const mined = await minedNonces(
    deps.rpc,
    stuck.map((tx) => tx.sender),
  );
  const keys = await keyRefs(deps, stuck);
  let filled = 0;
  for (const tx of stuck) {
    const chainNonce = mined.get(tx.sender);
    // Unknown (the chain did not answer): the next sweep looks again. Past it: the chain decided.
    if (chainNonce === undefined || chainNonce > tx.nonce) continue;
    const keyRef = keys.get(tx.sender);
    if (!keyRef) {
      deps.logger.warn(
        { sender: tx.sender, nonce: tx.nonce.toString() },
        "stuck transaction of an unknown sender",
      );
      continue;
    }
    const lease = await signFiller(deps, tx, keyRef);
    if (!lease) continue;
    const outcome = await broadcastLeased(deps, lease);
    deps.logger.info(
      { sender: tx.sender, nonce: tx.nonce.toString(), replaced: tx.txId, outcome: outcome.kind },
      "stuck transaction replaced by a filler",
    );
    if (outcome.kind === "accepted") filled++;
  }
  return filled;
}

async function findStuck(db: Db, replaceAfterMs: number): Promise<Stuck[]> {
  const rows = await queryRows<{ tx_id: string; sender: string; nonce: string | bigint; raw_tx: string }>(
    db,
    sql`select t.tx_id, t.sender, t.nonce, t.raw_tx from outgoing_transactions t
        where t.status in ('signed', 'submitted') and t.purpose <> 'filler' and t.broadcast_attempts > 0
          and (t.broadcast_outcome = 'refused'
            or t.created_at < now() - make_interval(secs => ${replaceAfterMs / 1000}))
          and not exists (select 1 from outgoing_transactions f
            where f.sender = t.sender and f.nonce = t.nonce and f.purpose = 'filler' and f.status <> 'failed')
        order by t.sender, t.nonce limit 50`,
  );
  return rows.map((row) => ({
    txId: row.tx_id,
    sender: row.sender,
    nonce: BigInt(row.nonce),
    rawTx: row.raw_tx,
  }));
}

/** The enclave key of each stuck transaction's sender: the service's own, or the agent wallet's. */
async function keyRefs(deps: FillerDeps, stuck: Stuck[]): Promise<Map<string, string>> {
  const keys = new Map<string, string>();
  const agents: string[] = [];
  for (const { sender } of stuck) {
    const own = deps.serviceKeys.get(sender);
    if (own) keys.set(sender, own);
    else agents.push(sender);
  }
  if (agents.length === 0) return keys;
  for (const [address, keyRef] of await resolveSenderKeys(deps.hooks, deps.db, [...new Set(agents)]))
    keys.set(address, keyRef);
  return keys;
}

/**
 * Under the sender's nonce row lock (so no other filler, batch or settler signs at this nonce
 * meanwhile), checks the transaction is still stuck with no filler beside it, signs the filler at
 * a fee above the stuck one's and stores it with a broadcast lease, with the domain's rows for it
 * (tracker-hooks.ts recordFiller: an agent sees a filler its wallet pays for). The sender's next
 * nonce does not move.
 */
async function signFiller(
  deps: FillerDeps,
  stuck: Stuck,
  keyRef: string,
): Promise<BroadcastLease | undefined> {
  const replaced = parseTransaction(stuck.rawTx as Hex);
  const quote = await deps.fees.replacement(NATIVE_TRANSFER_GAS, {
    maxFeePerGas: replaced.maxFeePerGas ?? replaced.gasPrice ?? 0n,
    maxPriorityFeePerGas: replaced.maxPriorityFeePerGas ?? replaced.gasPrice ?? 0n,
  });
  if (!quote.ok) return undefined;
  const fees = quote.value;
  return deps.db.transaction(async (tx) => {
    await tx.execute(sql`select 1 from sender_nonces where address = ${stuck.sender} for update`);
    const [open] = await queryRows<{ n: number }>(
      tx,
      sql`select 1 as n from outgoing_transactions t
          where t.tx_id = ${stuck.txId} and t.status in ('signed', 'submitted')
            and not exists (select 1 from outgoing_transactions f
              where f.sender = t.sender and f.nonce = t.nonce and f.purpose = 'filler' and f.status <> 'failed')`,
    );
    if (!open) return undefined;
    const signed = await deps.signer.signFiller({
      keyRef,
      from: stuck.sender as Hex,
      chainId: CHAIN_ID,
      nonce: stuck.nonce,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    if (!signed.ok) {
      const { code, detail, class: failureClass } = signed.error;
      const sealed = failureClass === "terminal_agent";
      if (sealed) deps.refused.set(`${stuck.sender}:${stuck.nonce}`, Date.now() + REFUSED_FILLER_PAUSE_MS);
      deps.logger[sealed ? "error" : "warn"](
        { sender: stuck.sender, nonce: stuck.nonce.toString(), replaced: stuck.txId, code, detail },
        sealed
          ? "enclave refused a filler under its sealed policy: the transaction stays in flight until the chain mines it or an operator closes its nonce"
          : "enclave could not sign a filler now; the next sweep asks again",
      );
      return undefined;
    }
    const { rawTransaction, txHash } = signed.value;
    const maxCostWei = NATIVE_TRANSFER_GAS * fees.maxFeePerGas;
    const [row] = await queryRows<{ tx_id: string }>(
      tx,
      sql`insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until)
          values ('filler', ${stuck.sender}, ${stuck.nonce}, ${txHash}, ${rawTransaction}, ${maxCostWei.toString()},
                  now() + make_interval(secs => ${deps.leaseMs / 1000}))
          returning tx_id`,
    );
    const lease: BroadcastLease = { txId: row!.tx_id, rawTx: rawTransaction, txHash, status: "signed" };
    await recordFiller(deps.hooks, tx, {
      sender: stuck.sender,
      nonce: stuck.nonce,
      txId: lease.txId,
      txHash,
      maxCostWei,
      replacedTxId: stuck.txId,
    });
    return lease;
  });
}
