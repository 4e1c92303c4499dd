/**
 * What a payer can make the settler pay in reverted settlements (docs/security.md#floods-and-what-they-still-get).
 * The settler pays the gas of what it signs, and settle.ts signs only what the chain would not
 * revert for anything the payer chose before signing; but a payer that moves its balance away
 * after presenting a payment (its own transaction mined just before ours) still makes the
 * settlement revert, and nothing read before signing can see that coming. So the facilitator's
 * settle and the demo's paid retry pass this guard first:
 *  - a payer whose settlements reverted REVERT_GUARD.reverts times within windowSeconds is refused
 *    settlement until the oldest of them leaves the window: counted in x402_reverts (a row as each
 *    revert's receipt is recorded), so the count holds across origins sharing the database;
 *  - so is a client address (IPv4, IPv6 /64) whose settlements reverted as many times, as this node
 *    saw them (in memory per node, like the other windows);
 *  - while a settlement is in flight it holds one of what its payer may still revert, so a payer
 *    never has more settlements in flight on a node than it may still cause to revert: draining
 *    its balance under a burst of its own payments reverts no more than the count allows. The
 *    payer's slots count its authorizations in flight (payer, nonce), not their presentations: one
 *    authorization makes at most one settlement transaction, so it can revert once however often
 *    it is presented, and its presentations share its one slot, held until the last of them
 *    releases it. Else anyone presenting again an authorization already settling (it is public once
 *    broadcast) from a few addresses would hold all of the payer's slots while it waits for the
 *    receipt, and the payer's own next payments would be refused. An address holds one slot per
 *    presentation, at most addressInFlight on a node, and once one of its settlements reverted, no
 *    more than it may still revert. A settlement holds its slot until it is mined, also after its
 *    settle answered `settlement_pending`. A settle past a slot waits for one (the burst is served
 *    in turn, not refused), up to maxWaitMs; past maxWaiting waiting on one key it is refused at once.
 * A refusal is `invalid_exact_evm_too_many_reverts` with Retry-After (x402/reasons.ts). A revert
 * whose authorization another transaction used first counts for neither: the settle that waited
 * for it asks the chain (revertUsedElsewhere), and the guard asks it of a payer's counted reverts
 * nobody asked about (one recorded by another origin's tracker after this one's origin died).
 */
import { sql } from "drizzle-orm";
import type { Hex } from "../../../shared/hex.ts";
import { SlidingWindowLimiter } from "../../../shared/rate-limiter.ts";
import { err, ok, type Result } from "../../../shared/result.ts";
import { createBatcher } from "../../db/batcher.ts";
import { type Db, pgArrayLiteral, queryRows } from "../../db/client.ts";
import { preparedStatement, runPrepared } from "../../db/prepared.ts";
import { addressGroup } from "../../http/client-ip.ts";
import { ignoreRefusal, type RefusalCounter } from "../../http/refusals.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";
import { askAuthorizationUse, type ChainAuthorizationUsed } from "./used-elsewhere.ts";

export const REVERT_GUARD = {
  /** Reverted settlements a payer, or a client address, may cause within the window. */
  reverts: 3,
  windowSeconds: 600,
  /** Settlements one client address may have in flight at once on a node before any reverted. */
  addressInFlight: 16,
  /**
   * Settles that may wait for a slot of one payer or address; past it, refused at once
   * (`rate_limited`). The address's payment window (client-limit.ts) bounds them first.
   */
  maxWaiting: 1_024,
} as const;

/**
 * Refused for now: the payer or the address may cause no more reverts until `retryAfterSeconds`
 * (`too_many_reverts`), or too many of its settles wait for a slot already (`busy`).
 */
export type RevertRefusal = { code: "too_many_reverts" | "busy"; retryAfterSeconds: number };

/** A settlement's place; released once with what its settlement came to. */
export type SettleSlot = { release(outcome: "reverted" | "not_reverted"): void };

export type RevertGuard = {
  /** The refusal a settle now would meet, without taking a slot (verify asks this). */
  check(clientIp: string, payer: string): Promise<RevertRefusal | undefined>;
  /**
   * A slot for one presentation of the payer's authorization `nonce` (waiting for one if need be),
   * or the refusal: the address's own, and the payer's that the authorization's other
   * presentations in flight hold already, or a new one.
   */
  enter(clientIp: string, payer: string, nonce: string): Promise<Result<SettleSlot, RevertRefusal>>;
};

export type CreateRevertGuardParams = {
  db: Db;
  refusals?: RefusalCounter;
  now?: () => number;
  /** REVERT_GUARD by default; tests may narrow it. */
  limits?: Partial<{ [K in keyof typeof REVERT_GUARD]: number }>;
  /**
   * How long a settle waits for a slot before it is refused `busy` (AGENT_X402_RECEIPT_TIMEOUT_MS):
   * a slot is held until its settlement is mined, which a stalled chain may not do for minutes,
   * and a settle must still answer while its caller waits.
   */
  maxWaitMs: number;
  /**
   * The chain's word on an authorization, asked of a payer's reverts nobody asked about yet, only
   * when the payer has reverts counted: a front-run's is then taken out of the count. Absent: every
   * revert recorded counts.
   */
  authorizationUsed?: ChainAuthorizationUsed;
};

type PayerReverts = { reverts: number; freesInSeconds: number };

/**
 * Per payer, its reverted settlements in the window (x402_reverts, a row each, as its receipt was
 * recorded): the count, at most `limit`, and the seconds until the oldest counted one leaves the
 * window.
 */
export const payerRevertsStatement = preparedStatement<"payers" | "window" | "limit">(
  "x402_payer_reverts",
  sql`select payer, count(*)::int as reverts,
        greatest(1, ceil(extract(epoch from
          min(reverted_at) + make_interval(secs => ${sql.placeholder("window")}::double precision) - now())))::int
          as frees_in
      from (select payer, reverted_at,
              row_number() over (partition by payer order by reverted_at desc) as n
            from x402_reverts
            where payer = any(${sql.placeholder("payers")}::text[])
              and reverted_at > now() - make_interval(secs => ${sql.placeholder("window")}::double precision)) r
      where n <= ${sql.placeholder("limit")}::int
      group by payer`,
).returns({ payer: "text", reverts: "int", frees_in: "int" });

export function createRevertGuard(params: CreateRevertGuardParams): RevertGuard {
  const limits = { ...REVERT_GUARD, ...params.limits };
  const now = params.now ?? Date.now;
  const refused = params.refusals ?? ignoreRefusal;
  const addressReverts = new SlidingWindowLimiter({
    limit: limits.reverts,
    windowSeconds: limits.windowSeconds,
    now,
  });
  // Settles that arrive together share one read.
  const readPayerReverts = createBatcher<string, PayerReverts>(
    async (payers) => {
      const rows = await runPrepared(params.db, payerRevertsStatement, {
        payers: pgArrayLiteral([...new Set(payers)]),
        window: limits.windowSeconds,
        limit: limits.reverts,
      });
      const byPayer = new Map(rows.map((row) => [row.payer, row]));
      return payers.map((payer) => {
        const row = byPayer.get(payer);
        return { reverts: row?.reverts ?? 0, freesInSeconds: row?.frees_in ?? 0 };
      });
    },
    { maxBatch: 256, maxInFlight: 2 },
  );
  const inFlight = new Map<string, number>();
  const waiting = new Map<string, number>();
  let wakeAll: Array<() => void> = [];
  const held = (key: string): number => inFlight.get(key) ?? 0;
  const add = (counts: Map<string, number>, key: string, delta: number): void => {
    const next = (counts.get(key) ?? 0) + delta;
    if (next <= 0) counts.delete(key);
    else counts.set(key, next);
  };

  /** What the payer and the address may still do now: a refusal, or their caps in flight. */
  const standing = async (
    address: string,
    payer: string,
  ): Promise<Result<{ payerCap: number; addressCap: number }, RevertRefusal>> => {
    let byPayer = await readPayerReverts(payer);
    // A payer with a clean record costs no chain read.
    if (
      byPayer.reverts > 0 &&
      params.authorizationUsed &&
      (await askUnaskedReverts(params.db, params.authorizationUsed, payer, limits.windowSeconds))
    )
      byPayer = await readPayerReverts(payer);
    if (byPayer.reverts >= limits.reverts) {
      return err({ code: "too_many_reverts", retryAfterSeconds: byPayer.freesInSeconds });
    }
    const byAddress = addressReverts.peek(address);
    if (!byAddress.allowed) {
      return err({ code: "too_many_reverts", retryAfterSeconds: byAddress.retryAfterSeconds });
    }
    const addressLeft = byAddress.remaining;
    return ok({
      payerCap: limits.reverts - byPayer.reverts,
      addressCap: addressLeft < limits.reverts ? addressLeft : limits.addressInFlight,
    });
  };

  return {
    async check(clientIp, payer) {
      const state = await standing(addressGroup(clientIp), payer.toLowerCase());
      if (state.ok) return undefined;
      refused("x402_reverts");
      return state.error;
    },
    async enter(clientIp, payer, nonce) {
      const address = `address ${addressGroup(clientIp)}`;
      const key = `payer ${payer.toLowerCase()}`;
      // Its presentations in flight: while there are any, the authorization holds a slot of the payer's.
      const authorization = `authorization ${payer.toLowerCase()} ${nonce.toLowerCase()}`;
      const deadline = now() + params.maxWaitMs;
      for (let waited = false; ; waited = true) {
        const state = await standing(addressGroup(clientIp), payer.toLowerCase());
        if (!state.ok) {
          refused("x402_reverts");
          return state;
        }
        const holdsPayerSlot = held(authorization) > 0;
        if ((holdsPayerSlot || held(key) < state.value.payerCap) && held(address) < state.value.addressCap) {
          if (!holdsPayerSlot) add(inFlight, key, 1);
          add(inFlight, authorization, 1);
          add(inFlight, address, 1);
          let released = false;
          return ok({
            release(outcome) {
              if (released) return;
              released = true;
              add(inFlight, authorization, -1);
              if (held(authorization) === 0) add(inFlight, key, -1);
              add(inFlight, address, -1);
              if (outcome === "reverted") addressReverts.record(addressGroup(clientIp));
              const woken = wakeAll;
              wakeAll = [];
              for (const wake of woken) wake();
            },
          });
        }
        const waitMs = deadline - now();
        if (
          waitMs <= 0 ||
          (!waited &&
            ((waiting.get(key) ?? 0) >= limits.maxWaiting ||
              (waiting.get(address) ?? 0) >= limits.maxWaiting))
        ) {
          refused("x402_in_flight");
          return err({ code: "busy", retryAfterSeconds: 1 });
        }
        // Wait for a settlement to end somewhere, then look again (its outcome may have used up
        // what this payer or address may still revert), or until the wait is up.
        add(waiting, key, 1);
        add(waiting, address, 1);
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          wakeAll.push(resolve);
          timer = setTimeout(resolve, waitMs);
        });
        clearTimeout(timer);
        add(waiting, key, -1);
        add(waiting, address, -1);
      }
    },
  };
}

/**
 * Whether a settlement of `payer`'s that reverted did so because another transaction used its
 * authorization first (anyone holding it can relay it: the seller, a watcher of the mempool): the
 * chain then holds the authorization as used, where a settlement the payer made revert (its
 * balance moved away) leaves it unused, the revert undoing the flag. Such a revert paid the seller
 * and is no fault of the payer's or its address's: the settlement keeps what the chain said
 * (used-elsewhere.ts), its row is taken out of x402_reverts, and true is answered so the slot is
 * released as not reverted. The chain out of reach leaves it counted.
 */
export async function revertUsedElsewhere(
  db: Db,
  authorizationUsed: ChainAuthorizationUsed,
  authorization: { from: Hex; nonce: Hex },
): Promise<boolean> {
  return (await askAuthorizationUse(db, authorizationUsed, authorization)) === true;
}

/**
 * Asks the chain about each revert of `payer`'s counted in the window that nobody asked about yet
 * (the settle that waited for it asks at once; one whose origin died, or whose settle was answered
 * `settlement_pending` and ended on another origin, is recorded by another origin's tracker, which
 * does not): true when one of them was a front-run, taken out of the count.
 */
async function askUnaskedReverts(
  db: Db,
  authorizationUsed: ChainAuthorizationUsed,
  payer: string,
  windowSeconds: number,
): Promise<boolean> {
  const unasked = await queryRows<{ payer: Hex; nonce: Hex }>(
    db,
    sql`select x.payer, x.nonce from x402_reverts r join x402_settlements x on x.id = r.settlement_id
        where r.payer = ${payer}
          and r.reverted_at > now() - make_interval(secs => ${windowSeconds}::double precision)
          and x.authorization_used_elsewhere is null`,
  );
  let freed = false;
  for (const authorization of unasked) {
    const used = await askAuthorizationUse(db, authorizationUsed, {
      from: authorization.payer,
      nonce: authorization.nonce,
    });
    freed ||= used === true;
  }
  return freed;
}

/** The wire reason of a refusal: its own for reverts, the windows' `rate_limited` for a full queue. */
export function guardReason(refusal: RevertRefusal): X402Reason {
  switch (refusal.code) {
    case "too_many_reverts":
      return X402_REASONS.tooManyReverts;
    case "busy":
      return X402_REASONS.rateLimited;
  }
}
