/**
 * A kind of transaction, as a domain hands it to the outbox (submit.ts): data, and the pure
 * functions that decide about one item. The domain says what is its own: which rows an item
 * claims, which facts its checks read, what may be signed and with which signer op and key, and
 * its rows in the statement that stores what was signed. The outbox does the rest, the same way
 * for every kind: batching, the senders' chain views and fees, the lock of their nonce rows,
 * signing in nonce order, the store, the broadcast lane and the receipts.
 *
 * Money's kind is actions/execute.ts (faucet payouts and transfers), x402's is x402/payee/settle.ts
 * (settlements).
 */
import type { SQL } from "drizzle-orm";
import { sql } from "drizzle-orm";
import type { FeeQuote, Fees } from "../chain/fees.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { PipelinedTransaction } from "../db/pipelined-transaction.ts";
import { jsonOf, type PreparedStatement, preparedStatement } from "../db/prepared.ts";
import type {
  SignerFailure,
  SignFillerParams,
  SignSettlementParams,
  SignTransactionParams,
  SignTransactionResult,
} from "../signer/types.ts";
import type { SenderView, TxPurpose } from "./intent.ts";

/** What the outbox adds to every signing request: the chain, the nonce, the fees. */
type OutboxFields = "chainId" | "nonce" | "maxFeePerGas" | "maxPriorityFeePerGas" | "gasLimit";

/**
 * What to sign, as data: the enclave op and its fields (which key, what to pay whom). The outbox
 * adds the chain id, the nonce and the fees, and calls the op.
 */
export type SigningRequest =
  | ({ op: "signTransfer" | "signFaucet" } & Omit<SignTransactionParams, OutboxFields>)
  | ({ op: "signSettlement" } & Omit<SignSettlementParams, OutboxFields>)
  | ({ op: "signFiller" } & Omit<SignFillerParams, OutboxFields>);

/** An item whose claim the batch holds, with the id its claim statement returned. */
export type Claimed<Item> = { item: Item; id: string };

/** An item that was claimed and then not signed, and what its domain says of it. */
export type Unsigned<Item, Refusal> = Claimed<Item> & { refusal: Refusal };

/** When an item's checks run: the batch's fees and time, and the most the transaction can cost. */
export type CheckAt = { fees: Fees; now: Date; costWei: bigint };

/** The columns a claim statement returns for each item it claimed. */
type ClaimColumns = { key: "text"; id: "text" };
/** The columns a store statement returns: each stored transaction's id, and the kind's answer row. */
const storeColumns = {
  tx_hash: "text",
  tx_id: "uuid",
  answer: jsonOf<unknown>({ nullable: true }),
} as const;
type StoreColumns = typeof storeColumns;

export type OutboxKind<Item, Chain, Facts, Refusal> = {
  /** Names its statements (`<name>_store_batch`) and its log lines; lowercase letters and underscores. */
  name: string;
  purpose(item: Item): TxPurpose;
  /**
   * How items share batches: at most `maxBatch` each, `maxInFlight` at once up to their commits, or
   * up to the chain's taking their broadcasts (`untilBroadcast`: a sender's batches then reach the
   * chain one after another). `waitsForRoom`: a batch starts only once the broadcast lane has room
   * (lane.ts room), so a chain slower than signing slows the answers instead of piling up signed
   * transactions.
   */
  batching: { maxBatch: number; maxInFlight: number; untilBroadcast: boolean; waitsForRoom: boolean };
  /** The gas limit every transaction of the kind is signed with; its fee quote is for it. */
  gasLimit: bigint;
  /**
   * How many of one sender's items are signed at once (signing.ts): 1 when each signature counts
   * against a sealed budget of the key, more when nothing does.
   */
  window: number;
  /** The kind's clock: the checks' `now`. */
  now(): Date;
  /** The address that signs and pays for the item. */
  sender(item: Item): string;
  /**
   * The nonce the item is signed at, when it is its own and not its sender's next (a filler's: the
   * stuck transaction's). Such items are signed one by one and move no next nonce back.
   */
  nonce?(item: Item): bigint;
  /**
   * The fees of the transaction the item replaces at its nonce: its own are quoted to outbid them
   * (chain/fees.ts replacement), item by item, instead of one quote for the batch.
   */
  replaces?(item: Item): { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
  /** Read each sender's chain view (mined nonce, balance) as its item queues, for `chain`. */
  readsSenderViews: boolean;
  /**
   * The domain's rows an item holds while it is signed: its statement takes the first item of each
   * `key` in the batch and returns `key` and `id` of each it claimed; an item not claimed (another
   * request holds it) is answered `unclaimed`.
   */
  claim: {
    key(item: Item): string;
    statement: PreparedStatement<string, ClaimColumns>;
    values(items: readonly Item[]): Record<string, unknown>;
  };
  /**
   * The batch's reads of the chain, started as the batch opens: each sender's mined nonce (for the
   * next-nonce rule), and whatever the checks need. Undefined when the chain did not answer.
   */
  chain(
    rpc: JsonRpcUpstream,
    batch: { items: readonly Item[]; views: ReadonlyMap<string, Promise<SenderView | undefined>> },
  ): Promise<{ minedNonces: ReadonlyMap<string, bigint>; chain: Chain } | undefined>;
  /**
   * The facts the checks read, after the senders' nonce rows are locked (a statement reads what was
   * committed when it started, so these see every earlier signing of the senders). `run` writes
   * behind the lock in the batch's transaction.
   */
  facts(
    read: { run: PipelinedTransaction["run"]; rpc: JsonRpcUpstream },
    batch: { items: readonly Item[]; claimed: Promise<readonly Claimed<Item>[]>; chain: Chain; now: Date },
  ): Promise<Facts>;
  /** Whether the item may be signed now, given the facts and what the batch signed before it. */
  check(item: Item, facts: Facts, at: CheckAt): Refusal | null;
  /**
   * Counts an item in the facts, so the items after it see it as if it had committed: once signed
   * with a window of 1, once admitted with a wider one (submit.ts).
   */
  count(item: Item, facts: Facts, at: CheckAt): void;
  signing(item: Item): SigningRequest;
  /**
   * What an enclave failure means for the item: `final`, a decision about it (ended with the
   * refusal in the store statement), or the service's state (nothing signed, it may be run again).
   */
  unsigned(item: Item, failure: SignerFailure): { final: boolean; refusal: Refusal };
  /** What every claimed item is told when the chain gives no fees or no view: not now. */
  chainDown(quote: FeeQuote): Refusal;
  /** Its rows in the store statement (defineKindStore). */
  store: {
    statement: PreparedStatement<string, StoreColumns>;
    /** The domain's columns of a signed item (`signedColumns`), given what the enclave answered. */
    row(claimed: Claimed<Item>, at: CheckAt, signed: SignTransactionResult): Record<string, unknown>;
    /** The statement's own parameters, from what the batch refused and could not sign. */
    values(ended: {
      refused: readonly Unsigned<Item, Refusal>[];
      unavailable: readonly Unsigned<Item, Refusal>[];
      now: Date;
    }): Record<string, unknown>;
  };
};

/**
 * The statement that stores what a batch signed, with the domain's rows, its name
 * `<name>_store_batch`: the signed transactions (with the domain's `signedColumns`) in `signed`,
 * stored with broadcast leases that run from this statement's clock; the senders' next nonces
 * moved past them (never back: a filler's nonce is behind); and the domain's CTEs, each a
 * data-modifying one reading `signed` and `stored` (tx_id, tx_hash of each stored one). `answer`
 * names the CTE whose returned row (with its `tx_hash`) is each stored transaction's answer, so a
 * domain answers its caller from what it stored, not from what it meant to store.
 */
export function defineKindStore<StoreParam extends string = never>(domain: {
  name: string;
  signedColumns: SQL;
  ctes: ReadonlyArray<{ name: string; sql: SQL }>;
  answer?: string;
}): PreparedStatement<"signed" | "leaseSeconds" | StoreParam, StoreColumns> {
  const answer = domain.answer
    ? sql`(select row_to_json(r) from ${sql.raw(domain.answer)} r where r.tx_hash = st.tx_hash)`
    : sql`null::json`;
  const ctes = domain.ctes.map((cte) => sql`, ${sql.raw(cte.name)} as (${cte.sql})`);
  return preparedStatement<"signed" | "leaseSeconds" | StoreParam>(
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
        update sender_nonces s set next_nonce = greatest(s.next_nonce, n.next), updated_at = now()
        from (select sender, max(nonce) + 1 as next from signed group by sender) n
        where s.address = n.sender)${sql.join(ctes)}
      select st.tx_hash, st.tx_id, ${answer} as answer from stored st`,
  ).returns(storeColumns);
}
