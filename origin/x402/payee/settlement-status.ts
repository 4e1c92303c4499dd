/**
 * `GET {base}/x402/facilitator/settlements/{payer}/{nonce}` and `…/settlements/tx/{hash}`
 * (docs/x402.md#settlement-status): what a settlement came to, public like the facilitator's other
 * routes, for a payer or a seller whose settle answer was lost or said `settlement_pending`. Read
 * from the database every origin shares, so any origin answers for a settlement another made. A
 * malformed key is 400 `validation_failed`; a key nobody presented, 404 `not_found`.
 */
import { Hono } from "hono";
import type { Hex } from "../../../shared/hex.ts";
import type { Db } from "../../db/client.ts";
import { AppError } from "../../errors.ts";
import type { AppEnv } from "../../http/env.ts";
import { route } from "../../openapi/route.ts";
import { readSettlementView, type SettlementKey, type SettlementView } from "./settlement-view.ts";
import { askAuthorizationUse, type ChainAuthorizationUsed } from "./used-elsewhere.ts";

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const WORD = /^0x[0-9a-fA-F]{64}$/;

export function createSettlementStatusRouter(
  db: Db,
  authorizationUsed: ChainAuthorizationUsed,
  /** AGENT_X402_VALIDITY_MARGIN_SECONDS: past validBefore and this, an unused authorization stays unused. */
  validityMarginSeconds: number,
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const answer = async (key: SettlementKey): Promise<SettlementView> => {
    const read = await readSettlementView(db, key, validityMarginSeconds);
    if (!read) throw new AppError("not_found", "no settlement is known by that key");
    const { view, nonce } = read;
    // A settlement that moved nothing may still have paid its payee, by another relayer's
    // transaction using its authorization (until the authorization's validBefore, anyone holding it
    // can): the chain is asked, unless its answer can no longer change (used, or unused as read
    // past validBefore: used-elsewhere.ts). The chain out of reach leaves what was known. A
    // settlement in flight or settled costs no chain read.
    if ((view.status !== "failed" && view.status !== "reverted") || read.use_final) return view;
    const used = await askAuthorizationUse(
      db,
      authorizationUsed,
      { from: view.payer as Hex, nonce: nonce as Hex },
      { final: read.ask_final },
    ).catch(() => undefined);
    return used === undefined ? view : { ...view, authorization_used_elsewhere: used };
  };
  route(app, "/x402/facilitator", "x402SettlementByTransaction", async (c) => {
    const hash = c.req.param("hash") ?? "";
    if (!WORD.test(hash))
      throw new AppError("validation_failed", "hash must be a 32-byte hex transaction hash");
    c.header("Cache-Control", "no-store");
    return c.json(await answer({ transaction: hash.toLowerCase() }));
  });
  route(app, "/x402/facilitator", "x402SettlementByPayment", async (c) => {
    const payer = c.req.param("payer") ?? "";
    const nonce = c.req.param("nonce") ?? "";
    if (!ADDRESS.test(payer)) throw new AppError("validation_failed", "payer must be a 20-byte hex address");
    if (!WORD.test(nonce)) throw new AppError("validation_failed", "nonce must be a 32-byte hex nonce");
    c.header("Cache-Control", "no-store");
    return c.json(await answer({ payer: payer.toLowerCase(), nonce: nonce.toLowerCase() }));
  });
  return app;
}
