-- The payment-identifier id a settlement was claimed under: a later presentation under the same id
-- is that request, answered as the settlement; under another id, or none, it is told the nonce is
-- used. The id is not signed, so a settled payment presented again with an id added was answered
-- paid again (x402/payee/earlier-presentation.ts). Nullable, no default: no rewrite.
ALTER TABLE "x402_settlements" ADD COLUMN "payment_id" text;
--> statement-breakpoint
-- A settlement made before this column answered every presentation of an id bound to its nonce as
-- paid. Left null, a retry under that id with a fresh authorization would take the binding over
-- and be paid a second time, so each gets the id first bound to its nonce.
UPDATE "x402_settlements" s SET "payment_id" = p."payment_id"
FROM (
  SELECT DISTINCT ON ("payer", "nonce") "payer", "nonce", "payment_id" FROM "x402_payment_ids"
  ORDER BY "payer", "nonce", "created_at", "payment_id"
) p
WHERE p."payer" = s."payer" AND p."nonce" = s."nonce";
