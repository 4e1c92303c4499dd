/**
 * The link between public registration and this node's key-pool refill (docs/operations.md,
 * "The key pool refills on demand"). Registration wakes the refill when an issuance leaves the
 * free stock near the registration reserve, and a registration that finds the stock at the reserve
 * waits, bounded, for the refill's next batch instead of being refused, as long as this node can
 * make keys at all. Node-local: each origin runs its own refill, and every decision about a key is
 * still taken in the database (a woken refill counts the whole pool, every node's batches too).
 */

/** What a waiting registration learns: a batch became available, or the refill cannot make keys now. */
export type KeyProgress = "made" | "idle" | "failed" | "timeout";

/** Registration's view of the refill (STYLE: narrow what each part sees). */
export type KeyDemand = {
  /**
   * This node can make keys now: its refill worker runs (the enclave endpoint and admin key are
   * configured, the gateway is on) and its last round did not fail.
   */
  canMake(): boolean;
  /**
   * Asks for a refill round now. `keyReserve` is the registration policy's reserve, so that the
   * round keeps a batch of free keys above it, whatever KEY_POOL_TARGET says.
   */
  wake(params: { keyReserve: number }): void;
  /**
   * Resolves at the refill's next event after this call: a batch made available (`made`), a round
   * that ended without making one (`idle`: the pool was already full, say by another node), a
   * round that failed (`failed`: the enclave or the backup disk), or `timeoutMs` passing.
   */
  nextProgress(timeoutMs: number): Promise<KeyProgress>;
};

/** The refill worker's side of the link (origin/keypool/capability.ts). */
export type KeyDemandRefill = {
  /** The worker started (`wake` runs its next round now) or stopped (undefined). */
  attach(worker: { wake(): void } | undefined): void;
  /** The reserve the latest registration reported, 0 before any. */
  keyReserve(): number;
  /** Batches keep failing: no key can be made before `untilMs` (Date.now() time). */
  backOff(untilMs: number): void;
  /** A batch of the round was made available. */
  madeBatch(): void;
  /** The round ended; `failed` when one of its batches failed. */
  roundEnded(failed: boolean): void;
};

export type KeyDemandLink = { demand: KeyDemand; refill: KeyDemandRefill };

/** A fresh link; nothing is attached until the key pool's worker starts. */
export function createKeyDemand(now: () => number = Date.now): KeyDemandLink {
  let worker: { wake(): void } | undefined;
  let reserve = 0;
  let backOffUntil = 0;
  const waiters = new Set<(progress: KeyProgress) => void>();
  const tell = (progress: KeyProgress): void => {
    for (const waiter of [...waiters]) waiter(progress);
  };

  const demand: KeyDemand = {
    canMake: () => worker !== undefined && now() >= backOffUntil,
    wake({ keyReserve }) {
      reserve = keyReserve;
      if (demand.canMake()) worker?.wake();
    },
    nextProgress(timeoutMs) {
      return new Promise<KeyProgress>((resolve) => {
        const settle = (progress: KeyProgress): void => {
          clearTimeout(timer);
          waiters.delete(settle);
          resolve(progress);
        };
        const timer = setTimeout(() => settle("timeout"), Math.max(0, timeoutMs));
        waiters.add(settle);
      });
    },
  };
  const refill: KeyDemandRefill = {
    attach(next) {
      worker = next;
      // A stopped worker makes no more keys: nobody should wait for it.
      if (!next) tell("failed");
    },
    keyReserve: () => reserve,
    backOff(untilMs) {
      backOffUntil = untilMs;
    },
    madeBatch: () => tell("made"),
    roundEnded: (failed) => tell(failed ? "failed" : "idle"),
  };
  return { demand, refill };
}

/** A demand for a node that makes no keys (tests and tools that compose no key-pool worker). */
export const NO_KEY_DEMAND: KeyDemand = {
  canMake: () => false,
  wake: () => {},
  nextProgress: async () => "failed",
};
