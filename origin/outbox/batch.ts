/**
 * A batch of the service's own transactions, from the domain's claim to the broadcast lane, in one
 * database transaction whose statements are pipelined (db/pipelined-transaction.ts) and named
 * (db/prepared.ts). Round trips between processes are what a transaction costs most here, so a
 * batch pays each once: one statement locking the senders' nonce rows (with the domain's claim when
 * the domain takes both at once), the domain's reads of its facts, the signatures, one statement
 * storing what was signed, one commit, one JSON-RPC batch of broadcasts.
 *
 * What the outbox owns here: the transaction; the lock of the senders' nonce rows, in address
 * order, so two batches never wait on each other in a cycle (the lock serialises every signing of a
 * sender, so the facts read after it see every earlier one); the next-nonce rule (the stored next
 * nonce, or the chain's mined one when the chain is ahead: a first use, or a transaction sent
 * without us); signing each sender's queue in nonce order (signing.ts); the one statement that
 * stores the signed bytes with broadcast leases and moves the senders' next nonces; the commit,
 * before anything is broadcast; and handing the leases to the node's broadcast lane (lane.ts).
 *
 * What a domain brings, fixed when its module loads (defineOutboxBatch): its claim, if it is taken
 * in the lock statement, and the CTEs of its rows in the store statement, which read the outbox's
 * `signed` (each signed transaction, with the domain's columns) and `stored` (tx_id, tx_hash of
 * each stored one). Then, per batch (runOutboxBatch): its own statements, its chain reads, its pure
 * checks (the SigningStep) and its answer.
 */
import { type SQL, sql } from "drizzle-orm";
import { type Db, pgArrayLiteral } from "../db/client.ts";
import { openPipelinedTransaction, type PipelinedTransaction } from "../db/pipelined-transaction.ts";
import { jsonOf, type PreparedStatement, preparedStatement } from "../db/prepared.ts";
import type { BroadcastLease, TxPurpose } from "./intent.ts";
import type { BroadcastLane, LaneOutcome } from "./lane.ts";
import { type SigningStep, signInNonceOrder } from "./signing.ts";

/** A domain's part of the batch statements (see the header). */
export type OutboxBatchDomain = {
  /** The statements' name prefix (lowercase letters and underscores): `<name>_lock_batch`, `<name>_store_batch`. */
  name: string;
  /**
   * A claim taken in the same statement as the nonce rows: its CTEs (before the outbox's
   * `nonces`), and the json expression the statement returns of it as `claimed`.
   */
  claim?: { ctes: SQL; result: SQL };
  /** The domain's columns of each signed transaction in `signed` (`name type, ...`). */
  signedColumns: SQL;
  /** The domain's CTEs of the store statement, each a data-modifying one reading `signed` / `stored`. */
  store: ReadonlyArray<{ name: string; sql: SQL }>;
};

/** What the lock statement returns: the domain's claim, and each locked sender's next nonce. */
const lockColumns = {
  claimed: jsonOf<unknown>({ nullable: true }),
  nonces: jsonOf<Record<string, string>>({ nullable: true }),
} as const;

/** What the store statement returns: each stored transaction's id. */
const storeColumns = { tx_hash: "text", tx_id: "uuid" } as const;

/** The composed, named statements of one domain's batches. */
export type OutboxBatchStatements<ClaimParam extends string, StoreParam extends string> = {
  lock: PreparedStatement<"senders" | ClaimParam, typeof lockColumns>;
  store: PreparedStatement<"signed" | "leaseSeconds" | StoreParam, typeof storeColumns>;
};

/** Composes and names a domain's batch statements; call it when the domain's module loads. */
export function defineOutboxBatch<ClaimParam extends string = never, StoreParam extends string = never>(
  domain: OutboxBatchDomain,
): OutboxBatchStatements<ClaimParam, StoreParam> {
  const claim = domain.claim;
  const lock = preparedStatement<"senders" | ClaimParam>(
    `${domain.name}_lock_batch`,
    sql`with ${claim ? sql`${claim.ctes},` : sql``}
      nonces as (
        insert into sender_nonces (address, next_nonce)
        select address, 0 from unnest(${sql.placeholder("senders")}::text[]) with ordinality as s(address, n)
        order by n
        on conflict (address) do update set updated_at = now()
        returning address, next_nonce)
      select ${claim ? claim.result : sql`null::json`} as claimed,
             (select json_object_agg(address, next_nonce::text) from nonces) as nonces`,
  ).returns(lockColumns);
  const domainCtes = domain.store.map((cte) => sql`, ${sql.raw(cte.name)} as (${cte.sql})`);
  const store = preparedStatement<"signed" | "leaseSeconds" | StoreParam>(
    `${domain.name}_store_batch`,
    sql`with signed as (
        select * from json_to_recordset(${sql.placeholder("signed")}::json) as s(
          purpose text, sender text, nonce bigint, tx_hash text, raw_tx text, max_cost_wei numeric,
          ${domain.signedColumns})),
      stored as (
        insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until)
        select purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei,
          clock_timestamp() + make_interval(secs => ${sql.placeholder("leaseSeconds")}::double precision)
        from signed order by sender, nonce
        returning tx_id, tx_hash),
      nonces as (
        update sender_nonces s set next_nonce = n.next, updated_at = now()
        from (select sender, max(nonce) + 1 as next from signed group by sender) n
        where s.address = n.sender)${sql.join(domainCtes)}
      select tx_hash, tx_id from stored`,
  ).returns(storeColumns);
  return { lock, store };
}

export type OutboxBatchDeps = {
  db: Db;
  /** The node's broadcast lane, which sends what a batch stored once it has committed. */
  lane: BroadcastLane;
  /** How long a broadcast lease lasts (store.ts broadcastLeaseMs). */
  leaseMs: number;
};

/** What a domain says of each transaction it signs, for the store statement. */
export type OutboxSigningStep<Item> = SigningStep<Item> & {
  /** Called once the item is signed: its purpose, the most it can cost, and the domain's columns. */
  intent(item: Item): { purpose: TxPurpose; maxCostWei: bigint; row: Record<string, unknown> };
};

/** A transaction the batch stored: the domain's item, its lease, and how its broadcast went. */
export type StoredIntent<Item> = { item: Item; lease: BroadcastLease; broadcast: Promise<LaneOutcome> };

export type OutboxBatch<Item, ClaimParam extends string, StoreParam extends string> = {
  /** Runs the domain's own statement in the batch's transaction, behind everything before it. */
  run: PipelinedTransaction["run"];
  /**
   * Locks the senders' nonce rows (made on a sender's first use), in address order, with the
   * domain's claim when it has one; resolves with the claim's result. The lock is held to the
   * commit: a concurrent batch of one of these senders waits for it, so each gets its own nonces.
   * Reads that must see every earlier signing of these senders come after it, in their own
   * statement (a statement reads the data committed when it started).
   */
  lock(senders: Iterable<string>, claim: Record<ClaimParam, unknown>): Promise<unknown>;
  /**
   * Signs one locked sender's items in nonce order (signing.ts) from its next nonce: the stored
   * one, or `minedNonce` when the chain is ahead.
   */
  sign(
    sender: string,
    minedNonce: bigint,
    items: readonly Item[],
    step: OutboxSigningStep<Item>,
  ): Promise<void>;
  /**
   * In one statement, written with `commit`: the signed transactions stored with broadcast leases
   * (which run from this statement's clock, after the signing, not from the transaction's start),
   * their senders' next nonces moved past them, and the domain's rows (`values` are its
   * parameters); `null`: nothing to store, only the commit. Once committed, the stored
   * transactions go to the broadcast lane, in signing order.
   */
  store(values: Record<StoreParam, unknown> | null): Promise<StoredIntent<Item>[]>;
};

type SignedRow<Item> = { item: Item; lease: BroadcastLease; row: Record<string, unknown> };

/**
 * Opens the batch's transaction and runs `body` in it. The batch commits in `store`; a body that
 * returns without storing, or throws, rolls it back.
 */
export async function runOutboxBatch<Item, ClaimParam extends string, StoreParam extends string, Result>(
  deps: OutboxBatchDeps,
  statements: OutboxBatchStatements<ClaimParam, StoreParam>,
  body: (batch: OutboxBatch<Item, ClaimParam, StoreParam>) => Promise<Result>,
): Promise<Result> {
  const tx = await openPipelinedTransaction(deps.db);
  let ended = false;
  let storedNonces: Map<string, bigint> | undefined;
  const signed: SignedRow<Item>[] = [];
  const batch: OutboxBatch<Item, ClaimParam, StoreParam> = {
    run: (statement, values) => tx.run(statement, values),
    async lock(senders, claim) {
      const sorted = [...new Set(senders)].sort();
      const [row] = await tx.run(statements.lock, {
        ...claim,
        senders: pgArrayLiteral(sorted),
      } as Record<"senders" | ClaimParam, unknown>);
      storedNonces = new Map(
        Object.entries(row?.nonces ?? {}).map(([address, nonce]) => [address, BigInt(nonce)]),
      );
      return row?.claimed;
    },
    async sign(sender, minedNonce, items, step) {
      if (!storedNonces?.has(sender))
        throw new Error(`signing for ${sender}, whose nonce row the batch has not locked`);
      // The next-nonce rule: the stored next nonce, unless the chain has mined past it.
      let next = storedNonces.get(sender)!;
      if (minedNonce > next) next = minedNonce;
      await signInNonceOrder(items, next, {
        ...step,
        signed(item, nonce, result) {
          step.signed(item, nonce, result);
          const { purpose, maxCostWei, row } = step.intent(item);
          signed.push({
            item,
            lease: { txId: "", rawTx: result.rawTransaction, txHash: result.txHash, status: "signed" },
            row: {
              ...row,
              purpose,
              sender,
              nonce: nonce.toString(),
              tx_hash: result.txHash,
              raw_tx: result.rawTransaction,
              max_cost_wei: maxCostWei.toString(),
            },
          });
        },
      });
    },
    async store(values) {
      ended = true;
      let ids = new Map<string, string>();
      if (values === null) {
        if (signed.length > 0) throw new Error("a batch that signed must store what it signed");
        await tx.commit();
      } else {
        const [rows] = await Promise.all([
          tx.run(statements.store, {
            ...values,
            signed: JSON.stringify(signed.map((item) => item.row)),
            leaseSeconds: deps.leaseMs / 1000,
          }),
          tx.commit(),
        ]);
        ids = new Map(rows.map((row) => [row.tx_hash, row.tx_id]));
      }
      const leases = signed.map(({ lease }) => ({ ...lease, txId: ids.get(lease.txHash)! }));
      const broadcasts = deps.lane.send(leases);
      return signed.map(({ item }, n) => ({ item, lease: leases[n]!, broadcast: broadcasts[n]! }));
    },
  };
  try {
    return await body(batch);
  } finally {
    if (!ended) await tx.rollback();
  }
}
