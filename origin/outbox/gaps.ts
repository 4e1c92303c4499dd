/**
 * Closing the holes a refusal leaves in a sender's nonces (docs/architecture.md). The chain mines a sender's
 * transactions in nonce order only, so a refused transaction with later ones signed behind it
 * stalls them all: they wait in the node's queue, and the sender's next transaction waits behind
 * them. When nothing came after it, the refusal hands its nonce out again (store.ts
 * releaseNonceIfLast); otherwise the tracker calls this, which fills the hole with a filler: a
 * transfer of nothing from the sender to itself at that nonce, signed by the enclave's sign_filler
 * (it can move no money, so the enclave signs it for any sending key within the fee ceiling). Once it is mined, the
 * transactions behind it are mined as they were signed, and their agents see them confirm.
 *
 * Why a filler rather than signing the later transactions again at the freed nonce: those bytes
 * may already be in a node's queue, and would be mined once the hole is filled; signing their
 * operations again would then pay them twice. The filler leaves every signed transaction as it is.
 */
import { sql } from "drizzle-orm";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { Hex } from "../../shared/hex.ts";
import { type FeeOracle, NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { batchResults, isQuantity } from "../chain/json-rpc-results.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { type Db, queryRows } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { SignerClient } from "../signer/types.ts";
import type { BroadcastLease } from "./intent.ts";
import { broadcastLeased } from "./sender.ts";
import { resolveSenderKeys } from "./tracker-hooks.ts";

/** A hole is filled again this long after a filler that did not close it (itself refused). */
const REFILL_AFTER_SECONDS = 30;

export type GapFillerDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  logger: Logger;
  signer: SignerClient;
  fees: FeeOracle;
  /** The service's own senders besides agent wallets, by lowercase address: the treasury, the settler. */
  serviceKeys: ReadonlyMap<string, string>;
  leaseMs: number;
};

type Hole = { sender: string; nonce: bigint };

/**
 * Fills the holes found now: a nonce of a sender whose every stored transaction was refused, with
 * a transaction of the same sender still waiting (signed or submitted) above it, and the chain's
 * nonce for the sender not yet past it. Returns how many fillers the chain accepted.
 */
export async function fillNonceGaps(deps: GapFillerDeps): Promise<number> {
  const holes = await findHoles(deps.db);
  if (holes.length === 0) return 0;
  const mined = await minedNonces(
    deps.rpc,
    holes.map((hole) => hole.sender),
  );
  const keys = await keyRefs(deps, holes);
  let filled = 0;
  for (const hole of holes) {
    const chainNonce = mined.get(hole.sender);
    // Unknown (the chain did not answer): the next sweep looks again. Past it: nothing to fill.
    if (chainNonce === undefined || chainNonce > hole.nonce) continue;
    const keyRef = keys.get(hole.sender);
    if (!keyRef) {
      deps.logger.warn(
        { sender: hole.sender, nonce: hole.nonce.toString() },
        "nonce gap of an unknown sender",
      );
      continue;
    }
    const lease = await signFiller(deps, hole, keyRef);
    if (!lease) continue;
    const outcome = await broadcastLeased(deps.db, deps.rpc, lease);
    deps.logger.info(
      { sender: hole.sender, nonce: hole.nonce.toString(), outcome: outcome.kind },
      "nonce gap filled",
    );
    if (outcome.kind === "accepted") filled++;
  }
  return filled;
}

async function findHoles(db: Db): Promise<Hole[]> {
  const rows = await queryRows<{ sender: string; nonce: string | bigint }>(
    db,
    sql`select distinct f.sender, f.nonce from outgoing_transactions f
        where f.status = 'failed'
          and not exists (select 1 from outgoing_transactions l
            where l.sender = f.sender and l.nonce = f.nonce and l.status <> 'failed')
          and exists (select 1 from outgoing_transactions w
            where w.sender = f.sender and w.nonce > f.nonce and w.status in ('signed', 'submitted'))
          and not exists (select 1 from outgoing_transactions r
            where r.sender = f.sender and r.nonce = f.nonce and r.purpose = 'filler'
              and r.updated_at > now() - make_interval(secs => ${REFILL_AFTER_SECONDS}))
        order by f.sender, f.nonce limit 50`,
  );
  return rows.map((row) => ({ sender: row.sender, nonce: BigInt(row.nonce) }));
}

/** Each sender's mined nonce at `latest`, in one JSON-RPC batch; missing when not answered. */
async function minedNonces(rpc: JsonRpcUpstream, senders: string[]): Promise<Map<string, bigint>> {
  const unique = [...new Set(senders)];
  const answer = await rpc.send(
    unique.map((address, id) => ({
      jsonrpc: "2.0",
      id,
      method: "eth_getTransactionCount",
      params: [address, "latest"],
    })),
  );
  const results = batchResults(answer);
  const nonces = new Map<string, bigint>();
  for (const [id, address] of unique.entries()) {
    const value = results.get(id);
    if (isQuantity(value)) nonces.set(address, BigInt(value));
  }
  return nonces;
}

/** The enclave key of each hole's sender: the service's own, or the agent wallet's. */
async function keyRefs(deps: GapFillerDeps, holes: Hole[]): Promise<Map<string, string>> {
  const keys = new Map<string, string>();
  const agents: string[] = [];
  for (const { sender } of holes) {
    const own = deps.serviceKeys.get(sender);
    if (own) keys.set(sender, own);
    else agents.push(sender);
  }
  if (agents.length === 0) return keys;
  for (const [address, keyRef] of await resolveSenderKeys(deps.db, [...new Set(agents)]))
    keys.set(address, keyRef);
  return keys;
}

/**
 * Under the sender's nonce row lock (so no other filler, batch or settler signs at this nonce
 * meanwhile), checks the hole is still open, signs the filler and stores it with a broadcast
 * lease. The sender's next nonce does not move: the transactions above the hole hold it.
 */
async function signFiller(
  deps: GapFillerDeps,
  hole: Hole,
  keyRef: string,
): Promise<BroadcastLease | undefined> {
  const quote = await deps.fees.quote(NATIVE_TRANSFER_GAS);
  if (!quote.ok) return undefined;
  const fees = quote.value;
  return deps.db.transaction(async (tx) => {
    await tx.execute(sql`select 1 from sender_nonces where address = ${hole.sender} for update`);
    const [live] = await queryRows<{ n: number }>(
      tx,
      sql`select 1 as n from outgoing_transactions
          where sender = ${hole.sender} and nonce = ${hole.nonce} and status <> 'failed'`,
    );
    if (live) return undefined;
    const signed = await deps.signer.signFiller({
      keyRef,
      from: hole.sender as Hex,
      chainId: CHAIN_ID,
      nonce: hole.nonce,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    if (!signed.ok) {
      deps.logger.warn(
        { sender: hole.sender, nonce: hole.nonce.toString(), code: signed.error.code },
        "enclave refused a nonce-gap filler",
      );
      return undefined;
    }
    const { rawTransaction, txHash } = signed.value;
    const [row] = await queryRows<{ tx_id: string }>(
      tx,
      sql`insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until)
          values ('filler', ${hole.sender}, ${hole.nonce}, ${txHash}, ${rawTransaction},
                  ${(NATIVE_TRANSFER_GAS * fees.maxFeePerGas).toString()},
                  now() + make_interval(secs => ${deps.leaseMs / 1000}))
          returning tx_id`,
    );
    return { txId: row!.tx_id, rawTx: rawTransaction, txHash, status: "signed" } satisfies BroadcastLease;
  });
}
