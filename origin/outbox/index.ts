/**
 * The outbox: the service's own transactions (faucet payouts, transfers, x402 settlements and the
 * fillers that replace stuck ones), each signed once, sent in its sender's nonce order, and followed
 * until the chain decides it. Domains hand it intents; it owns everything between their decision and the chain, and
 * it is the only module that writes outgoing_transactions and sender_nonces
 * (owns-outgoing.test.ts).
 *
 * A domain hands the outbox a kind (kind.ts): data and pure functions of its own (its claim, the
 * facts its checks read, the checks, which enclave op signs with which key, its rows in the store
 * statement) and what it answers its caller. Money's kind is actions/execute.ts, x402's
 * x402/payee/settle.ts; the composition root (compose.ts) builds the outbox once, with the domains'
 * followers, sweeps and key lookups passed in, and hands it to both.
 *
 * What the outbox does, in this order, one file a step:
 *   intent.ts    the words every step shares: purposes, states, a sender's chain view, a lease;
 *   kind.ts      what a domain hands it, and the store statement composed from a kind's rows;
 *   submit.ts    the one path: items batched as they arrive, the senders' chain views read as they
 *                queue, the kind's claim and the lock of the senders' nonce rows in one round trip,
 *                the facts behind the lock, the checks and signatures in nonce order, one
 *                statement storing what was signed with the kind's rows, the commit, then the
 *                lane;
 *   signing.ts   signing a sender's queue in nonce order, with the one refusal rule: a nonce is
 *                taken only by a signature that is kept, and after a refused signature the ones
 *                behind it are made again, one at a time, from the refused one's nonce (so a
 *                batch never leaves a hole of its own making);
 *   store.ts     the rows after the batch: broadcast leases (no two origins send one transaction
 *                at once), and each state the chain moves a transaction to, written in the same
 *                statement as the state of the domain row that follows it;
 *   broadcast-answers.ts what a node's answer to a broadcast proves: accepted, refused (a
 *                validation error about the transaction, in each node's words) or unknown
 *                (everything else: a timeout, "nonce too low", "already known"). No answer ends a
 *                transaction;
 *   sender.ts    broadcasting: one JSON-RPC batch for many, each answer read for what it proves and
 *                recorded; whatever it was, the transaction stays in flight and keeps its nonce;
 *   lane.ts      the node's one broadcast lane, shared by every kind: stored transactions leave
 *                in signing order, one JSON-RPC batch on its way at a time, while the next batch
 *                signs; each gets back its broadcast's outcome and the receipt read right after;
 *   receipts.ts  the receipts of a broadcast batch read in one JSON-RPC batch (whatever the nodes
 *                answered) and recorded with the broadcast in one statement, or waited for by a
 *                caller that answers with one (outbox.ts receipt);
 *   followers.ts the domain rows whose state follows a transaction's (an agent action, an x402
 *                settlement): the outbox writes them in the statement that moves the
 *                transactions, whose text names no domain table;
 *   decide.ts    who ends a transaction: the chain. Once the sender's mined nonce has passed it, the
 *                transaction mined at that nonce decides: ours is recorded with its receipt and the
 *                others there end `failed` (store.ts recordMined); one the service did not sign ends
 *                ours `failed` once that has held for a while;
 *   fillers.ts   ending a stuck transaction sooner: a zero-value filler the enclave signs at the
 *                same nonce at a higher fee (never a second payment at a new nonce, which could be
 *                mined beside the first);
 *   tracker.ts   what a crash, a lying or unreachable chain left behind: `signed` sent with the same
 *                bytes, in-flight transactions followed to their end and sent again, stuck ones
 *                replaced, and the domains' sweeps run;
 *   tracker-hooks.ts what the tracker and the filler ask of the domains: sweeps (money ends the
 *                agent actions nobody finished, actions/abandon.ts), the keys of the senders the
 *                outbox does not know (the agent wallets), and the domain's rows for a filler
 *                (money shows it to the agent).
 *
 * Performance rests on batching (docs/performance.md): a batch takes one round trip for its claim
 * and lock, one for its facts, one for its store statement and commit, and one JSON-RPC batch of
 * broadcasts. A BatchObserver (the origin's metrics) is told each batch's size and its steps' times.
 *
 * chain/ stays read-only access to the chain (JSON-RPC, fees, block numbers); everything that
 * writes to the chain or to the outgoing_transactions table is here. The outbox's files name no
 * domain table.
 */

export type { SenderView, TxPurpose } from "./intent.ts";
export { type CheckAt, defineKindStore, type OutboxKind, type Unsigned } from "./kind.ts";
export { createOutbox, type Outbox, type OutboxDomains } from "./outbox.ts";
export { readReceipts } from "./receipts.ts";
export type { BatchObserver, BatchStep } from "./submit.ts";
export type { TxTrackerOptions } from "./tracker.ts";
