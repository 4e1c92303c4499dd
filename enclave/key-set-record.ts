/** Plaintext shape of a sealed key-set file (see keystore.ts). */
import * as z from "zod";
import { bytesSchema } from "../shared/enclave-ops.ts";
import { KEY_REF_PATTERN } from "../shared/identity-proof.ts";

const bytes = (length: number) => bytesSchema.refine((value) => value.length === length);

export const keySetRecordSchema = z.object({
  v: z.literal(1),
  namespace: z.string().min(1),
  batch_id: z.string().min(1),
  created_at: z.string(),
  keys: z.array(
    z.object({
      key_ref: z.string().regex(KEY_REF_PATTERN),
      private_key: bytes(32),
      public_key: bytes(65),
      address: z.string().regex(/^0x[0-9a-fA-F]{40}$/),
    }),
  ),
});
export type KeySetRecord = z.infer<typeof keySetRecordSchema>;
