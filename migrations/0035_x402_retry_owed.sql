-- The one retry a settlement_pending answer owes a payment: set when a presentation is answered
-- settlement_pending, taken by the one later presentation of the same payload answered as paid.
-- Every other presentation of a settled payment is told its nonce is used, so a seller delivers
-- once for one payment (x402/payee/earlier-presentation.ts). A constant default adds no rewrite.
ALTER TABLE "x402_settlements" ADD COLUMN "retry_owed" boolean DEFAULT false NOT NULL;
