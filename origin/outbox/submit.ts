/**
 * The outbox's one path, the same for every kind (kind.ts): from the items a domain submits to
 * the broadcast lane, in batches of what arrives together, each one database transaction whose
 * statements are pipelined (db/pipelined-transaction.ts) and named (db/prepared.ts). Round trips
 * between processes are what a transaction costs most here, so a batch pays each once:
 *
 *   1. as an item queues, its sender's chain view is asked for (outbox.ts, batched with the
 *      others queueing then), so the read overlaps the wait for a batch instead of opening one;
 *   2. the batch opens: the fee quote and the kind's chain reads start; `begin`, the planner's
 *      settings of the batch (byKeyStatement), the kind's claim and the lock of the senders' nonce
 *      rows go out in one round trip. The lock is taken in address order, so two batches never
 *      wait on each other in a cycle, and it serialises every signing of a sender, across origins;
 *   3. once the chain has answered, the kind's facts are read behind the lock (they see every
 *      earlier signing of these senders). A chain that did not answer ends the batch here, with
 *      nothing signed: every claimed item is told `unavailable`;
 *   4. each sender's claimed items are checked and signed in arrival order at consecutive nonces
 *      (signing.ts), different senders at once. The next nonce is the stored one, or the chain's
 *      mined one when the chain is ahead (a first use, or a transaction sent without us). Each
 *      check sees the items signed before it, counted as if they had committed;
 *   5. one statement stores what was signed with the kind's rows (the refused ended, the
 *      unavailable released), written with `commit`; nothing is broadcast before the commit;
 *   6. the stored transactions go to the node's broadcast lane, in signing order.
 *
 * A crash before the commit leaves nothing signed that escaped; after it, the tracker sends the
 * stored bytes. Batches of a kind run `maxInFlight` at once; a batch holding senders in common
 * with another waits for its commit at the lock, and its broadcasts queue behind the other's.
 */
import { sql } from "drizzle-orm";
import { CHAIN_ID, WEI_PER_UNIT } from "../../shared/constants.ts";
import type { FeeOracle, FeeQuote, Fees } from "../chain/fees.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { type Batcher, createBatcher } from "../db/batcher.ts";
import { byKeyStatement } from "../db/by-key.ts";
import { type Db, pgArrayLiteral } from "../db/client.ts";
import { openPipelinedTransaction } from "../db/pipelined-transaction.ts";
import { jsonOf, preparedStatement } from "../db/prepared.ts";
import type { Logger } from "../logger.ts";
import type { SignerClient, SignerResult, SignTransactionResult } from "../signer/types.ts";
import type { BroadcastLease, SenderView } from "./intent.ts";
import type { CheckAt, Claimed, OutboxKind, SigningRequest } from "./kind.ts";
import type { BroadcastLane, LaneOutcome } from "./lane.ts";
import { signInNonceOrder } from "./signing.ts";

/** A transaction a batch stored and handed to the lane. */
export type SentTransaction = { txId: string; txHash: string; broadcast: Promise<LaneOutcome> };

/** What became of one submitted item. */
export type Submitted<Refusal> =
  /**
   * Signed, stored and handed to the broadcast lane; `stored` is the kind's answer row as the store
   * statement returned it (kind.ts defineKindStore `answer`), null without one.
   */
  | { kind: "sent"; sent: SentTransaction; stored: unknown }
  /** A check or the enclave decided against it: the store statement ended it with the refusal. */
  | { kind: "refused"; refusal: Refusal }
  /** Not now (the chain or the enclave could not be used): nothing signed, its claim let go. */
  | { kind: "unavailable"; refusal: Refusal }
  /** Another request holds its claim (in another batch, another origin, or earlier in this one). */
  | { kind: "unclaimed" };

/** The enclave ops the outbox signs with for the kinds. */
export type KindSigner = Pick<SignerClient, "signTransfer" | "signFaucet" | "signSettlement" | "signFiller">;

/**
 * The steps of a batch, each observed as the time from the batch's start to its end: the chain's
 * reads and the fee quote in, the kind's facts read behind the lock, the signatures back, the
 * commit, and the batch's end (for a kind that waits for its broadcasts, the chain's answer). A
 * batch the chain did not answer goes from `chain_read` to `committed`, signing nothing.
 */
export const BATCH_STEPS = ["chain_read", "facts", "signed", "committed", "ended"] as const;
export type BatchStep = (typeof BATCH_STEPS)[number];

/** Where a batch's time goes (the origin's metrics: origin/metrics/metrics.ts). */
export type BatchObserver = {
  /** A batch of `kind` began with `items` items. */
  began(kind: string, items: number): void;
  /** `seconds` after its start, a batch of `kind` finished `step`. */
  step(kind: string, step: BatchStep, seconds: number): void;
};

export type SubmitDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  logger: Logger;
  signer: KindSigner;
  fees: FeeOracle;
  lane: BroadcastLane;
  /** How long a broadcast lease lasts (store.ts broadcastLeaseMs). */
  leaseMs: number;
  senderView(address: string): Promise<SenderView | undefined>;
  /** Told each batch's size and when it finished each step. */
  observer?: BatchObserver | undefined;
};

export type Submit = <Item, Chain, Facts, Refusal>(
  kind: OutboxKind<Item, Chain, Facts, Refusal>,
  item: Item,
) => Promise<Submitted<Refusal>>;

/** An item waiting for its batch, its sender's chain view already on its way when the kind reads one. */
type Queued<Item> = { item: Item; sender: string; view: Promise<SenderView | undefined> | undefined };

export function createSubmit(deps: SubmitDeps): Submit {
  const batchers = new WeakMap<object, Batcher<Queued<unknown>, Submitted<unknown>>>();
  return <Item, Chain, Facts, Refusal>(kind: OutboxKind<Item, Chain, Facts, Refusal>, item: Item) => {
    let run = batchers.get(kind) as Batcher<Queued<Item>, Submitted<Refusal>> | undefined;
    if (!run) {
      run = createBatcher((queued: Queued<Item>[]) => runBatch(deps, kind, queued), kind.batching);
      batchers.set(kind, run as Batcher<Queued<unknown>, Submitted<unknown>>);
    }
    const sender = kind.sender(item);
    return run({ item, sender, view: kind.readsSenderViews ? deps.senderView(sender) : undefined });
  };
}

/** Locks the senders' nonce rows (made on a sender's first use), in the order given; their next nonces. */
export const lockStatement = preparedStatement<"senders">(
  "outbox_lock_batch",
  sql`with nonces as (
        insert into sender_nonces (address, next_nonce)
        select address, 0 from unnest(${sql.placeholder("senders")}::text[]) with ordinality as s(address, n)
        order by n
        on conflict (address) do update set updated_at = now()
        returning address, next_nonce)
      select json_object_agg(address, next_nonce::text) as nonces from nonces`,
).returns({ nonces: jsonOf<Record<string, string>>({ nullable: true }) });

type Held<Item> = Claimed<Item> & { index: number; sender: string };
type Ended<Item, Refusal> = Held<Item> & { refusal: Refusal };
type Signed<Item> = { held: Held<Item>; lease: BroadcastLease; row: Record<string, unknown> };

async function runBatch<Item, Chain, Facts, Refusal>(
  deps: SubmitDeps,
  kind: OutboxKind<Item, Chain, Facts, Refusal>,
  queued: Queued<Item>[],
): Promise<Submitted<Refusal>[]> {
  const started = performance.now();
  const { observer } = deps;
  observer?.began(kind.name, queued.length);
  const done = (step: BatchStep): void =>
    observer?.step(kind.name, step, (performance.now() - started) / 1000);
  try {
    return await runSteps(deps, kind, queued, done);
  } finally {
    done("ended");
  }
}

async function runSteps<Item, Chain, Facts, Refusal>(
  deps: SubmitDeps,
  kind: OutboxKind<Item, Chain, Facts, Refusal>,
  queued: Queued<Item>[],
  done: (step: BatchStep) => void,
): Promise<Submitted<Refusal>[]> {
  // A chain slower than signing holds the next batch here, before anything is signed.
  if (kind.batching.waitsForRoom) await deps.lane.room();
  const items = queued.map((entry) => entry.item);
  const now = kind.now();
  // No database lock waits on the chain beyond these reads. One fee quote for the batch, or one per
  // item for a kind that outbids the transactions it replaces.
  const replaces = kind.replaces;
  const quoted: Promise<FeeQuote[]> = replaces
    ? Promise.all(items.map((item) => deps.fees.replacement(kind.gasLimit, replaces(item))))
    : deps.fees.quote(kind.gasLimit).then((quote) => items.map(() => quote));
  const chainRead = kind.chain(deps.rpc, { items, views: firstViews(queued) });
  const outcomes: Submitted<Refusal>[] = items.map(() => ({ kind: "unclaimed" }));
  const firsts = new Map<string, number>();
  items.forEach((item, index) => {
    const key = kind.claim.key(item);
    if (!firsts.has(key)) firsts.set(key, index);
  });
  const tx = await openPipelinedTransaction(deps.db);
  // In the same round trip as `begin`; a failure fails the statements after it, which are awaited.
  tx.run(byKeyStatement, {}).catch(() => {});
  let ended = false;
  const store = async (
    signed: readonly Signed<Item>[],
    unsigned: { refused: Ended<Item, Refusal>[]; unavailable: Ended<Item, Refusal>[] },
  ): Promise<void> => {
    ended = true;
    let ids = new Map<string, { txId: string; answer: unknown }>();
    if (signed.length + unsigned.refused.length + unsigned.unavailable.length === 0) {
      await tx.commit();
    } else {
      const [rows] = await Promise.all([
        tx.run(kind.store.statement, {
          ...kind.store.values({ ...unsigned, now }),
          signed: JSON.stringify(signed.map((entry) => entry.row)),
          leaseSeconds: deps.leaseMs / 1000,
        }),
        tx.commit(),
      ]);
      ids = new Map(rows.map((row) => [row.tx_hash, { txId: row.tx_id, answer: row.answer }]));
    }
    done("committed");
    for (const { index, refusal } of unsigned.refused) outcomes[index] = { kind: "refused", refusal };
    for (const { index, refusal } of unsigned.unavailable) outcomes[index] = { kind: "unavailable", refusal };
    const leases = signed.map(({ lease }) => ({ ...lease, txId: ids.get(lease.txHash)!.txId }));
    const broadcasts = deps.lane.send(leases);
    signed.forEach(({ held }, n) => {
      const { txId, txHash } = leases[n]!;
      const sent = { txId, txHash, broadcast: broadcasts[n]! };
      outcomes[held.index] = { kind: "sent", sent, stored: ids.get(txHash)!.answer };
    });
    if (kind.batching.untilBroadcast) await Promise.all(broadcasts);
  };
  try {
    const claiming = tx
      .run(kind.claim.statement, kind.claim.values([...firsts.values()].map((index) => items[index]!)))
      .then((rows) =>
        rows
          .map((row) => {
            const index = firsts.get(row.key)!;
            return { index, id: row.id, item: items[index]!, sender: queued[index]!.sender };
          })
          .sort((a, b) => a.index - b.index),
      );
    const senders = [...new Set(queued.map((entry) => entry.sender))].sort();
    const locking = tx.run(lockStatement, { senders: pgArrayLiteral(senders) });
    // Awaited below, unless the chain ends the batch first.
    claiming.catch(() => {});
    locking.catch(() => {});
    const [quotes, read] = await Promise.all([quoted, chainRead]);
    done("chain_read");
    const quote = quotes[0]!;
    if (!read || (!replaces && !quote.ok)) {
      const refusal = kind.chainDown(quote);
      const [claimed] = await Promise.all([claiming, locking]);
      await store([], { refused: [], unavailable: claimed.map((held) => ({ ...held, refusal })) });
      return outcomes;
    }
    const [claimed, locked, facts] = await Promise.all([
      claiming,
      locking,
      kind.facts({ run: tx.run, rpc: deps.rpc }, { items, claimed: claiming, chain: read.chain, now }),
    ]);
    done("facts");
    const nonces = new Map(
      Object.entries(locked[0]?.nonces ?? {}).map(([address, n]) => [address, BigInt(n)]),
    );
    const signing = await signClaimed(deps, kind, claimed, {
      facts,
      quotes,
      now,
      nextNonce(sender) {
        // The next-nonce rule: the stored next nonce, unless the chain has mined past it.
        const stored = nonces.get(sender)!;
        const mined = read.minedNonces.get(sender) ?? 0n;
        return mined > stored ? mined : stored;
      },
    });
    done("signed");
    await store(signing.signed, signing);
    return outcomes;
  } finally {
    if (!ended) await tx.rollback();
  }
}

/** Each sender's view as read when its first item of the batch queued: one consistent pair per sender. */
function firstViews<Item>(queued: Queued<Item>[]): Map<string, Promise<SenderView | undefined>> {
  const views = new Map<string, Promise<SenderView | undefined>>();
  for (const { sender, view } of queued) {
    if (view && !views.has(sender)) views.set(sender, view);
  }
  return views;
}

/**
 * Checks and signs the claimed items: each sender's in arrival order (its nonces follow one
 * another), different senders at once.
 */
async function signClaimed<Item, Chain, Facts, Refusal>(
  deps: SubmitDeps,
  kind: OutboxKind<Item, Chain, Facts, Refusal>,
  claimed: readonly Held<Item>[],
  at: { facts: Facts; quotes: readonly FeeQuote[]; now: Date; nextNonce(sender: string): bigint },
): Promise<{
  signed: Signed<Item>[];
  refused: Ended<Item, Refusal>[];
  unavailable: Ended<Item, Refusal>[];
}> {
  const { facts, now } = at;
  const signed: Signed<Item>[] = [];
  const refused: Ended<Item, Refusal>[] = [];
  const unavailable: Ended<Item, Refusal>[] = [];
  // Each sender's items queue in arrival order from its next nonce; an item with a nonce of its own
  // is a queue of one, at that nonce.
  const queues = new Map<string, { sender: string; first: bigint; items: Held<Item>[] }>();
  for (const held of claimed) {
    const { sender } = held;
    const own = kind.nonce?.(held.item);
    const key = own === undefined ? sender : `${sender}:${held.id}`;
    const queue = queues.get(key) ?? { sender, first: own ?? at.nextNonce(sender), items: [] };
    queue.items.push(held);
    queues.set(key, queue);
  }
  const admitted = new Map<Held<Item>, { request: SigningRequest; check: CheckAt }>();
  await Promise.all(
    [...queues.values()].map(({ sender, first, items }) =>
      signInNonceOrder(items, first, {
        window: kind.window,
        admit(held) {
          const quote = at.quotes[held.index]!;
          if (!quote.ok) {
            unavailable.push({ ...held, refusal: kind.chainDown(quote) });
            return false;
          }
          const fees = quote.value;
          const request = kind.signing(held.item);
          const check = { fees, now, costWei: valueWei(request) + fees.gasLimit * fees.maxFeePerGas };
          const refusal = kind.check(held.item, facts, check);
          if (refusal !== null) {
            refused.push({ ...held, refusal });
            return false;
          }
          admitted.set(held, { request, check });
          // Signed one at a time, an item counts once its signature is kept (exactly what was
          // signed); signed a window at once, it counts as it is admitted, so the items admitted
          // after it into its window see it: a signature the enclave then refuses stays counted,
          // which can only refuse more, never sign past a limit or a balance.
          if (kind.window > 1) kind.count(held.item, facts, check);
          return true;
        },
        sign(held, nonce) {
          const { request, check } = admitted.get(held)!;
          return signRequest(deps.signer, request, nonce, check.fees);
        },
        signed(held, nonce, result) {
          const { check } = admitted.get(held)!;
          if (kind.window === 1) kind.count(held.item, facts, check);
          signed.push({
            held,
            lease: { txId: "", rawTx: result.rawTransaction, txHash: result.txHash, status: "signed" },
            row: {
              ...kind.store.row(held, check, result),
              purpose: kind.purpose(held.item),
              sender,
              nonce: nonce.toString(),
              tx_hash: result.txHash,
              raw_tx: result.rawTransaction,
              max_cost_wei: check.costWei.toString(),
            },
          });
        },
        unsigned(held, failure) {
          // Nothing signed, or nothing that left the enclave for good: the nonce is still free.
          const { final, refusal } = kind.unsigned(held.item, failure);
          (final ? refused : unavailable).push({ ...held, refusal });
          if (failure.class !== "retryable") {
            deps.logger.warn(
              { kind: kind.name, claim: held.id, code: failure.code, class: failure.class },
              "enclave refused to sign",
            );
          }
        },
      }),
    ),
  );
  return { signed, refused, unavailable };
}

/** The wei a transaction moves besides its fee. */
function valueWei(request: SigningRequest): bigint {
  return request.op === "signTransfer" || request.op === "signFaucet"
    ? request.valueUnits * WEI_PER_UNIT
    : 0n;
}

/** Calls the request's enclave op with the chain id, the nonce and the fees. */
function signRequest(
  signer: KindSigner,
  request: SigningRequest,
  nonce: bigint,
  fees: Fees,
): Promise<SignerResult<SignTransactionResult>> {
  const fields = {
    chainId: CHAIN_ID,
    nonce,
    maxFeePerGas: fees.maxFeePerGas,
    maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    gasLimit: fees.gasLimit,
  };
  switch (request.op) {
    case "signSettlement": {
      const { op: _, ...params } = request;
      return signer.signSettlement({ ...params, ...fields });
    }
    case "signTransfer": {
      const { op: _, ...params } = request;
      return signer.signTransfer({ ...params, ...fields });
    }
    case "signFaucet": {
      const { op: _, ...params } = request;
      return signer.signFaucet({ ...params, ...fields });
    }
    case "signFiller": {
      // A filler's gas is the enclave's own (a plain transfer's): it takes no gas limit.
      const { op: _, ...params } = request;
      const { gasLimit: _gas, ...feesOnly } = fields;
      return signer.signFiller({ ...params, ...feesOnly });
    }
  }
}
