/**
 * What the chain says of the authorization of a settlement that moved nothing (`failed`,
 * `reverted`): used means another relayer's transaction used it, and the payee was paid by that
 * transaction (docs/x402.md#settlement-status). Learnt only after a settlement ended, by whoever
 * asks the chain then (the settle that waited for it, the revert guard, a payment id's binding,
 * the status routes, a presentation answered from it), and kept on the settlement, so its status
 * says so and the revert guard does not count its revert against the payer. A settlement that
 * settles is never asked.
 *
 * Until the authorization's validBefore anyone holding it may still use it, so an answer of unused
 * may turn; once past it (and the validity margin, AGENT_X402_VALIDITY_MARGIN_SECONDS: a block's
 * time may run behind our clock as it may run ahead of it when we sign), no block can take it, and
 * an answer of unused read then is final. Such an answer moves the settlement's updated_at to that
 * read: an unused answer kept with updated_at past that point is never asked again. One read
 * before it is (whoever read it), even if the settlement is looked at after validBefore.
 */
import { type Placeholder, type SQL, sql } from "drizzle-orm";
import type { Hex } from "../../../shared/hex.ts";
import type { Db } from "../../db/client.ts";
import type { PayerFactsReader } from "./payer-facts.ts";

/** Whether the chain holds `payer`'s authorization `nonce` as used; undefined when it did not answer. */
export type ChainAuthorizationUsed = (payer: Hex, nonce: Hex) => Promise<boolean | undefined>;

/** The chain's word on an authorization, from the reads verification makes (payer-facts.ts). */
export function chainAuthorizationUsed(payerFacts: PayerFactsReader): ChainAuthorizationUsed {
  return async (payer, nonce) => (await payerFacts(payer, nonce))?.nonceUsed;
}

/**
 * Keeps what the chain said of an ended settlement's authorization. Used also takes its revert
 * out of the revert guard's count (x402_reverts): the payer's payment was made. Rewrites nothing
 * the chain already said was used (a used authorization stays used), so of two origins recording
 * used at once only the first updates the row, and `x402.settlement.used_elsewhere` is written
 * once (migration 0045); it changes no status, so no second `.failed` or `.reverted` (0043).
 */
export async function recordAuthorizationUse(
  db: Db,
  authorization: { from: string; nonce: string },
  used: boolean,
  final = false,
): Promise<void> {
  const payer = authorization.from.toLowerCase();
  const nonce = authorization.nonce.toLowerCase();
  await db.execute(
    sql`with marked as (
          update x402_settlements set authorization_used_elsewhere = ${used}::boolean,
            updated_at = case when ${final}::boolean then now() else updated_at end
          where payer = ${payer} and nonce = ${nonce} and status in ('failed', 'reverted')
            and authorization_used_elsewhere is distinct from true
            and (authorization_used_elsewhere is distinct from ${used}::boolean or ${final}::boolean))
        delete from x402_reverts r using x402_settlements x
        where ${used}::boolean and r.settlement_id = x.id and x.payer = ${payer} and x.nonce = ${nonce}`,
  );
}

/**
 * Asks the chain about `authorization` of an ended settlement and keeps the answer: true when
 * another transaction used it, false when unused, undefined when the chain did not answer.
 * `final`: the settlement was read past its authorization's use (authorizationUseColumns
 * ask_final) before this asks, so the answer is the last.
 */
export async function askAuthorizationUse(
  db: Db,
  authorizationUsed: ChainAuthorizationUsed,
  authorization: { from: Hex; nonce: Hex },
  { final = false }: { final?: boolean } = {},
): Promise<boolean | undefined> {
  const used = await authorizationUsed(authorization.from, authorization.nonce);
  if (used !== undefined) await recordAuthorizationUse(db, authorization, used, final);
  return used;
}

/**
 * For a settlement row `x`: `use_final`, whether what it keeps of its authorization can no longer
 * change (used, or unused as read past the authorization's use), so the chain need not be asked;
 * `ask_final`, whether the chain's answer asked from now on is final. `marginSeconds`:
 * AGENT_X402_VALIDITY_MARGIN_SECONDS (a placeholder in a named statement).
 */
export function authorizationUseColumns(marginSeconds: number | Placeholder): SQL {
  const usableUntil = sql`to_timestamp((x.valid_before + ${marginSeconds}::bigint)::double precision)`;
  return sql`(x.authorization_used_elsewhere is true
      or (x.authorization_used_elsewhere is false and x.updated_at >= ${usableUntil})) as use_final,
    now() >= ${usableUntil} as ask_final`;
}

/** What authorizationUseColumns reads. */
export type AuthorizationUseColumns = { use_final: boolean; ask_final: boolean };

/** What a settlement row keeps of its authorization's use, read with authorizationUseColumns. */
export type KeptAuthorizationUse = { authorization_used_elsewhere: boolean | null } & AuthorizationUseColumns;

/**
 * Whether another transaction used the authorization of a settlement that moved nothing: as the
 * settlement keeps it once that can no longer change (`use_final`), so the chain is not asked
 * again; otherwise asked of the chain and kept (askAuthorizationUse, final when asked past the
 * authorization's use). Undefined when the chain did not answer.
 */
export async function authorizationUseOf(
  db: Db,
  authorizationUsed: ChainAuthorizationUsed,
  authorization: { from: Hex; nonce: Hex },
  kept: KeptAuthorizationUse,
): Promise<boolean | undefined> {
  if (kept.use_final) return kept.authorization_used_elsewhere === true;
  return askAuthorizationUse(db, authorizationUsed, authorization, { final: kept.ask_final });
}
