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
 *
 * A filler is one more kind of the outbox (kind.ts), on the path every transaction takes
 * (submit.ts): its claim is the stuck transaction, still in flight with no filler beside it; its
 * nonce is that transaction's, its fees outbid that transaction's, and its store statement holds
 * the domains' rows for it (money shows the agent a filler its wallet pays for).
 */

import { sql } from "drizzle-orm";
import { parseTransaction } from "viem";
import type { Hex } from "../../shared/hex.ts";
import { NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import { preparedStatement } from "../db/prepared.ts";
import type { Logger } from "../logger.ts";
import type { SignerFailure } from "../signer/types.ts";
import { minedNonces } from "./chain-reads.ts";
import { defineKindStore, type OutboxKind } from "./kind.ts";
import type { Submit } from "./submit.ts";
import { type FillerRows, resolveSenderKeys, type TrackerHooks } from "./tracker-hooks.ts";

/** A stuck transaction, with what its filler is signed with. */
type Stuck = {
  txId: string;
  sender: string;
  nonce: bigint;
  keyRef: string;
  fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
};

/**
 * Why no filler was signed: the chain decided meanwhile, the chain could not be read, the sealed fee
 * ceiling leaves no fee that could replace the stuck transaction (`ceiling`: the fee oracle's
 * words), or the enclave refused it.
 */
type NoFiller = "decided" | "unavailable" | { ceiling: string } | { failure: SignerFailure };

export type FillerKind = OutboxKind<Stuck, Map<string, bigint>, Map<string, bigint>, NoFiller>;

/**
 * The stuck transactions the batch may replace: still in flight with no filler at their nonce,
 * each locked, skipped when another origin's tracker holds it.
 */
export const fillerClaimStatement = preparedStatement<"txs">(
  "filler_claim_batch",
  sql`select t.tx_id::text as key, t.tx_id::text as id from outgoing_transactions t
      where t.tx_id = any(${sql.placeholder("txs")}::uuid[]) and t.status in ('signed', 'submitted')
        and not exists (select 1 from outgoing_transactions f
          where f.sender = t.sender and f.nonce = t.nonce and f.purpose = 'filler' and f.status <> 'failed')
      for update of t skip locked`,
).returns({ key: "text", id: "text" });

/** The fillers' store statement, with every domain's rows for them. */
export function fillerStoreStatement(parts: readonly FillerRows[]) {
  return defineKindStore({
    name: "filler",
    signedColumns: sql.join([sql`replaced_tx_id uuid`, ...parts.map((part) => part.signedColumns)], sql`, `),
    ctes: parts.flatMap((part) => part.ctes),
  });
}

/** The filler kind, its store statement holding `parts`' rows. */
export function fillerKind(parts: readonly FillerRows[]): FillerKind {
  return {
    name: "filler",
    purpose: () => "filler",
    // A filler unblocks the transactions behind it: it never waits for the lane's room.
    batching: { maxBatch: 50, maxInFlight: 1, untilBroadcast: true, waitsForRoom: false },
    gasLimit: NATIVE_TRANSFER_GAS,
    window: 1,
    now: () => new Date(),
    sender: (stuck) => stuck.sender,
    nonce: (stuck) => stuck.nonce,
    replaces: (stuck) => stuck.fees,
    readsSenderViews: false,
    claim: {
      key: (stuck) => stuck.txId,
      statement: fillerClaimStatement,
      values: (stuck) => ({ txs: pgArrayLiteral(stuck.map((tx) => tx.txId)) }),
    },
    async chain(rpc, batch) {
      const mined = await minedNonces(
        rpc,
        batch.items.map((stuck) => stuck.sender),
      );
      // Unknown for one sender: the next sweep looks again.
      if (batch.items.some((stuck) => !mined.has(stuck.sender))) return undefined;
      return { minedNonces: mined, chain: mined };
    },
    facts: async (_read, batch) => batch.chain,
    // Past its nonce, the chain has decided: nothing to replace.
    check: (stuck, mined) => (mined.get(stuck.sender)! > stuck.nonce ? "decided" : null),
    count: () => {},
    signing: (stuck) => ({ op: "signFiller", keyRef: stuck.keyRef, from: stuck.sender as Hex }),
    unsigned: (_stuck, failure) => ({ final: failure.class === "terminal_agent", refusal: { failure } }),
    // Fees above the sealed ceiling are the chain's answer, not its absence: no filler can be
    // signed under it, and the operator is told (replaceStuck).
    chainDown: (quote) =>
      !quote.ok && quote.error.code === "above_fee_ceiling" ? { ceiling: quote.error.detail } : "unavailable",
    store: {
      statement: fillerStoreStatement(parts),
      row: ({ item, id }, at, signed) =>
        Object.assign(
          { replaced_tx_id: id },
          ...parts.map((part) =>
            part.row({
              sender: item.sender,
              nonce: item.nonce,
              maxCostWei: at.costWei,
              countedOn: signed.countedOn,
            }),
          ),
        ),
      values: () => ({}),
    },
  };
}

export type FillerDeps = {
  db: Db;
  /** The domains' key lookups. */
  hooks: TrackerHooks;
  rpc: JsonRpcUpstream;
  logger: Logger;
  submit: Submit;
  kind: FillerKind;
  /** The service's own senders besides agent wallets, by lowercase address: the treasury, the settler. */
  serviceKeys: ReadonlyMap<string, string>;
  /** A transaction whose broadcasts were not refused is replaced once it has waited this long unmined. */
  replaceAfterMs: number;
  /**
   * The tracker's memory of the fillers the enclave refused under its sealed policy (by
   * `sender:nonce`, until when not to ask again): a budget spent today, a nonce it has no record of,
   * a filler it signed already whose bytes a crash lost; or one the sealed fee ceiling leaves no fee
   * for. Asking again each second would only repeat the refusal in the log. Also a stuck
   * transaction whose nonce the chain has passed (its receipt not read yet, a node failing those
   * reads): each ask would cost a database transaction and a nonce read, and such transactions
   * would fill the places findStuck reads.
   */
  refused: Map<string, number>;
};

/** How long a filler the enclave refused under its sealed policy is not asked for again. */
const REFUSED_FILLER_PAUSE_MS = 10 * 60_000;
/** How long a stuck transaction whose nonce the chain has passed is not looked at for a filler again. */
const DECIDED_PAUSE_MS = 60_000;

type Found = { txId: string; sender: string; nonce: bigint; rawTx: string };

/**
 * Replaces the stuck transactions found now: in flight, broadcast at least once, with no filler at
 * their nonce yet, the first of their sender in flight (findStuck), and either refused at their
 * last broadcast or unmined `replaceAfterMs` after their signing; the chain's nonce for
 * their sender not yet past them (once it is, the chain has decided). Returns how many fillers a
 * node accepted.
 */
export async function replaceStuck(deps: FillerDeps): Promise<number> {
  const now = Date.now();
  for (const [key, until] of deps.refused) if (until <= now) deps.refused.delete(key);
  // Those paused are left out by the query itself, so they never take the places of others.
  const found = await findStuck(deps.db, deps.replaceAfterMs, [...deps.refused.keys()]);
  if (found.length === 0) return 0;
  const keys = await keyRefs(deps, found);
  const stuck: Stuck[] = [];
  for (const tx of found) {
    const keyRef = keys.get(tx.sender);
    if (!keyRef) {
      deps.logger.warn(
        { sender: tx.sender, nonce: tx.nonce.toString() },
        "stuck transaction of an unknown sender",
      );
      continue;
    }
    const replaced = parseTransaction(tx.rawTx as Hex);
    const fees = {
      maxFeePerGas: replaced.maxFeePerGas ?? replaced.gasPrice ?? 0n,
      maxPriorityFeePerGas: replaced.maxPriorityFeePerGas ?? replaced.gasPrice ?? 0n,
    };
    stuck.push({ txId: tx.txId, sender: tx.sender, nonce: tx.nonce, keyRef, fees });
  }
  const outcomes = await Promise.all(stuck.map((tx) => deps.submit(deps.kind, tx)));
  let filled = 0;
  for (const [n, submitted] of outcomes.entries()) {
    const tx = stuck[n]!;
    const at = { sender: tx.sender, nonce: tx.nonce.toString(), replaced: tx.txId };
    if (submitted.kind === "sent") {
      const { outcome } = await submitted.sent.broadcast;
      deps.logger.info({ ...at, outcome: outcome.kind }, "stuck transaction replaced by a filler");
      if (outcome.kind === "accepted") filled++;
      continue;
    }
    if (submitted.kind !== "refused" && submitted.kind !== "unavailable") continue;
    const refusal = submitted.refusal;
    // The chain has passed its nonce: its receipt or decide.ts ends it, however long its receipt
    // cannot be read meanwhile; a filler asked for each sweep would only read the nonce again.
    if (refusal === "decided") deps.refused.set(`${tx.sender}:${tx.nonce}`, Date.now() + DECIDED_PAUSE_MS);
    if (typeof refusal === "string") continue;
    if ("ceiling" in refusal) {
      // Asked again after the pause: the base fee may fall, and the stuck one may mine meanwhile.
      deps.refused.set(`${tx.sender}:${tx.nonce}`, Date.now() + REFUSED_FILLER_PAUSE_MS);
      deps.logger.error(
        { ...at, detail: refusal.ceiling },
        "no filler can replace a stuck transaction under the sealed fee ceiling: the transaction stays in flight until the chain mines it, or a higher sealed fee ceiling (npm run enclave-policy -- apply --fee-ceiling) lets the filler asked for again in ten minutes outbid it",
      );
      continue;
    }
    const { code, detail } = refusal.failure;
    const sealed = submitted.kind === "refused";
    if (sealed) deps.refused.set(`${tx.sender}:${tx.nonce}`, Date.now() + REFUSED_FILLER_PAUSE_MS);
    deps.logger[sealed ? "error" : "warn"](
      { ...at, code, detail },
      sealed
        ? "enclave refused a filler under its sealed policy: the transaction stays in flight until the chain mines it, or the filler asked for again in ten minutes is allowed (the detail names the bound: a budget of the day, the sealed fee ceiling)"
        : "enclave could not sign a filler now; the next sweep asks again",
    );
  }
  return filled;
}

/**
 * The stuck transactions: each sender's first one still in flight, refused at its last broadcast or
 * signed more than `replaceAfterMs` ago, but for those `paused` (`sender:nonce`, replaceStuck). Never one behind it: the chain mines a sender's
 * transactions in nonce order, so that one is only waiting, and its filler, at a higher fee, would
 * take its place in a node's pool and end it `failed` with nothing wrong with it.
 */
async function findStuck(db: Db, replaceAfterMs: number, paused: readonly string[]): Promise<Found[]> {
  const rows = await queryRows<{ tx_id: string; sender: string; nonce: string | bigint; raw_tx: string }>(
    db,
    sql`select t.tx_id, t.sender, t.nonce, t.raw_tx from outgoing_transactions t
        where t.status in ('signed', 'submitted') and t.purpose <> 'filler' and t.broadcast_attempts > 0
          and not exists (select 1 from outgoing_transactions e
            where e.sender = t.sender and e.nonce < t.nonce and e.status in ('signed', 'submitted')
              and e.purpose <> 'filler')
          and (t.broadcast_outcome = 'refused'
            or t.created_at < now() - make_interval(secs => ${replaceAfterMs / 1000}))
          and not exists (select 1 from outgoing_transactions f
            where f.sender = t.sender and f.nonce = t.nonce and f.purpose = 'filler' and f.status <> 'failed')
          and not (t.sender || ':' || t.nonce::text = any(${pgArrayLiteral(paused)}::text[]))
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
async function keyRefs(deps: FillerDeps, stuck: Found[]): Promise<Map<string, string>> {
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
