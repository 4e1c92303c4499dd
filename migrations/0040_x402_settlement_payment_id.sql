-- The payment-identifier id a settlement was claimed under: a later presentation under the same id
-- is that request, answered as the settlement; under another id, or none, it is told the nonce is
-- used. The id is not signed, so a settled payment presented again with an id added was answered
-- paid again (x402/payee/earlier-presentation.ts). Nullable, no default: no rewrite.
ALTER TABLE "x402_settlements" ADD COLUMN "payment_id" text;
