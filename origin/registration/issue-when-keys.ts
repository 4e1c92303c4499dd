import { sleep } from "../../shared/sleep.ts";
import type { Db } from "../db/client.ts";
import type { KeyDemand } from "../keypool/demand.ts";
import {
  type IssuePublicIdentityParams,
  type IssuePublicIdentityResult,
  issuePublicIdentity,
} from "./issuance.ts";

export type IssueWhenKeysParams = IssuePublicIdentityParams & {
  /** The registration policy's key reserve, as the request's state read it. */
  keyReserve: number;
  /** KEY_POOL_BATCH_SIZE: the stock counts as near the reserve when less than a batch above it. */
  batchSize: number;
  /** This node's key-pool refill (keypool/demand.ts). */
  demand: KeyDemand;
  /** How long a request short of keys waits for the refill, in all. */
  waitMs: number;
  /** The client's request: once it is gone, no key is taken for it. */
  signal?: AbortSignal | undefined;
};

/**
 * The issuance, or `client_gone` when the client left before one issued (no key was taken for it,
 * and no refusal is the node's to report), and how long it waited for the refill in all (0 when it
 * did not).
 */
export type IssueWhenKeysResult = { issued: IssuePublicIdentityResult | "client_gone"; waitedMs: number };

/**
 * docs/operations.md#the-key-pool-refills-on-demand: issues as issuePublicIdentity does, and
 *   - wakes the refill when the issuance leaves fewer than a batch of keys above the reserve, so
 *     the next registrations find keys;
 *   - when the only refusal is the key reserve and this node can make keys, waits for the
 *     refill's next batch and tries again, until `waitMs` has passed, the refill fails or the
 *     client has gone. Each try is the whole issuance under the policy lock, so quotas, the
 *     ceiling and the reserve are judged afresh; the reserve itself is never handed out.
 * The request's admission was committed before: waiting consumes nothing more
 * (docs/api.md#registration-quotas-and-counters).
 */
export async function issueWhenKeys(db: Db, params: IssueWhenKeysParams): Promise<IssueWhenKeysResult> {
  const { demand, keyReserve, batchSize } = params;
  const deadline = performance.now() + params.waitMs;
  let waitedMs = 0;
  let idleInRow = 0;
  for (;;) {
    // Before every try, the first too: the client may have left while its attempt was admitted, or
    // during the pause below, and a try that issues would take a key and a quota for nobody.
    if (params.signal?.aborted) return { issued: "client_gone", waitedMs };
    const issued = await issuePublicIdentity(db, {
      day: params.day,
      ipGroup: params.ipGroup,
      freeKeyMargin: batchSize,
      proof: params.proof,
      signal: params.signal,
    });
    if (issued === "client_gone") return { issued, waitedMs };
    if (issued.ok) {
      if (issued.value.freeKeysLeft < keyReserve + batchSize) demand.wake({ keyReserve });
      return { issued, waitedMs };
    }
    const shortOfKeys = issued.error.code === "unavailable" && issued.error.reason === "key_reserve";
    const left = deadline - performance.now();
    if (!shortOfKeys || !demand.canMake() || left <= 0) {
      return { issued, waitedMs };
    }
    // Listening before waking: the round the wake starts cannot end unheard.
    const progress = demand.nextProgress(left);
    demand.wake({ keyReserve });
    const waitStarted = performance.now();
    const next = await orClientGone(progress, params.signal);
    waitedMs += Math.round(performance.now() - waitStarted);
    // A client that left stops the wait as it is, at once: its last refusal at the reserve is not
    // the node's state once the refill has made keys (docs/events.md#registration-events), and is
    // not reported.
    if (next === "client_gone") return { issued: "client_gone", waitedMs };
    if (next === "failed" || next === "timeout") return { issued, waitedMs };
    idleInRow = next === "idle" ? idleInRow + 1 : 0;
    if (idleInRow > 1) {
      // Rounds that end idle again and again: the shortfall is covered by batches on their way,
      // another origin's, which this node hears nothing of. Poll for them, more slowly each time,
      // rather than spin on an issuance and a round back to back (thousands a second).
      const pause = Math.min(IDLE_POLL_MAX_MS, IDLE_POLL_FIRST_MS * 2 ** (idleInRow - 2));
      const pauseStarted = performance.now();
      await sleep(Math.max(0, Math.min(pause, deadline - pauseStarted)));
      waitedMs += Math.round(performance.now() - pauseStarted);
    }
  }
}

/** The first pause after a second idle round in a row, doubling up to IDLE_POLL_MAX_MS. */
const IDLE_POLL_FIRST_MS = 50;
const IDLE_POLL_MAX_MS = 500;

/**
 * `progress`, or `client_gone` as soon as the client's request is aborted: a client that left
 * while the refill's round ran on (a batch the enclave makes, another origin's) was seen only once
 * the round ended, up to the whole wait, holding its request and its log line meanwhile.
 */
function orClientGone<T>(progress: Promise<T>, signal: AbortSignal | undefined): Promise<T | "client_gone"> {
  if (!signal) return progress;
  if (signal.aborted) return Promise.resolve("client_gone");
  return new Promise((resolve, reject) => {
    const gone = (): void => resolve("client_gone");
    signal.addEventListener("abort", gone, { once: true });
    progress.then(
      (value) => {
        signal.removeEventListener("abort", gone);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", gone);
        reject(error);
      },
    );
  });
}
