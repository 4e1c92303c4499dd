/** The served OpenAPI document's shape of a settlement (docs/x402.md#settlement-status). */
import * as z from "zod";
import { SETTLEMENT_STATES } from "./settlement-status.ts";

/**
 * A settlement as its status routes answer it (origin/x402/payee/settlement-view.ts renders it, and
 * its events carry it): the served OpenAPI document declares this shape.
 */
export const settlementViewSchema = z.object({
  status: z.enum(SETTLEMENT_STATES),
  payer: z.string(),
  payee: z.string(),
  amount: z.string().describe("a whole number of 6-decimal units, as a string"),
  network: z.string().describe("CAIP-2"),
  transaction: z.string().nullable().describe("the settler transaction's hash; null until signed"),
  block_number: z.string().nullable().describe("the block it was mined in; null until then"),
  reason: z.string().optional().describe("failed and reverted only: why it moved nothing"),
  authorization_used_elsewhere: z
    .boolean()
    .nullable()
    .optional()
    .describe(
      "failed and reverted only: true when another relayer's transaction used the authorization (the payee was paid by it), false when the chain holds it unused, null when not known",
    ),
  updated_at: z.string().describe("ISO 8601, UTC"),
});
