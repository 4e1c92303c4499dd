/**
 * `GET {base}/x402/facilitator/settlements/{payer}/{nonce}` and `…/settlements/tx/{hash}`
 * (docs/x402.md#settlement-status): what a settlement came to, public like the facilitator's other
 * routes, for a payer or a seller whose settle answer was lost or said `settlement_pending`. Read
 * from the database every origin shares, so any origin answers for a settlement another made. A
 * malformed key is 400 `validation_failed`; a key nobody presented, 404 `not_found`.
 */
import { Hono } from "hono";
import type { Db } from "../../db/client.ts";
import { AppError } from "../../errors.ts";
import type { AppEnv } from "../../http/env.ts";
import { route } from "../../openapi/route.ts";
import { readSettlementView, type SettlementKey } from "./settlement-view.ts";

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const WORD = /^0x[0-9a-fA-F]{64}$/;

export function createSettlementStatusRouter(db: Db): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const answer = async (key: SettlementKey) => {
    const view = await readSettlementView(db, key);
    if (!view) throw new AppError("not_found", "no settlement is known by that key");
    return view;
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
