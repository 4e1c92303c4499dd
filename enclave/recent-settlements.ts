/**
 * The settlements the settler key signed in this enclave (sign_settlement), by transaction hash,
 * kept in memory only: what a receipt may name (docs/security.md#offers-and-receipts). A settlement
 * can be mined only while its authorization is valid, so an entry is kept until an hour after its
 * validBefore (a receipt is asked for once the transaction is mined), and the record is bounded
 * besides. Not sealed on disk: writing it with each settlement would add to the paid path's state
 * writes; after a restart the enclave signs no receipt for a settlement signed before it.
 */
import { RecencyMap } from "../shared/recency-map.ts";

export type RecordedSettlement = {
  /** Lowercase payer (the authorization's from) and payee (its to). */
  payer: string;
  payee: string;
  valueUnits: bigint;
  /** Unix seconds: the authorization's validBefore. */
  validBefore: bigint;
};

/** How long after its validBefore a settlement may still be named by a receipt. */
const KEEP_AFTER_VALIDITY_SECONDS = 3_600n;
/** The most entries kept; past it the oldest go first (a receipt for them is then refused). */
const MAX_ENTRIES = 100_000;

export class RecentSettlements {
  /** In the order they were recorded. */
  private readonly byHash = new RecencyMap<string, RecordedSettlement>();

  /** Records a signed settlement under its transaction hash. */
  record(txHash: string, settlement: RecordedSettlement, nowSeconds: bigint): void {
    this.prune(nowSeconds);
    this.byHash.set(txHash.toLowerCase(), settlement);
    if (this.byHash.size > MAX_ENTRIES) this.byHash.shift();
  }

  /** The settlement signed under `txHash`, while it is remembered. */
  get(txHash: string, nowSeconds: bigint): RecordedSettlement | undefined {
    const found = this.byHash.get(txHash.toLowerCase());
    if (!found || found.validBefore + KEEP_AFTER_VALIDITY_SECONDS < nowSeconds) return undefined;
    return found;
  }

  private prune(nowSeconds: bigint): void {
    // Insertion order is close to validBefore order (validities are bounded by the sealed maximum).
    for (let oldest = this.byHash.oldest(); oldest; oldest = this.byHash.oldest()) {
      if (oldest.value.validBefore + KEEP_AFTER_VALIDITY_SECONDS >= nowSeconds) break;
      this.byHash.shift();
    }
  }
}
