/**
 * Wire schemas of POST {base}/agent/v1/token/rotate (docs/agents.md, "Rotating the token"): what the
 * route validates with and the OpenAPI document is built from. Runtime-neutral: no `node:` imports.
 */
import * as z from "zod";
import { CAPABILITIES } from "./constants.ts";

/** Takes exactly `{}`: nothing about the new token is the caller's to choose. */
export const tokenRotationRequestSchema = z.strictObject({});

/** 200, the new token shown once (`Cache-Control: no-store`); the identity is the same. */
export const tokenRotationResponseSchema = z.object({
  token: z.string(),
  agent_id: z.string(),
  assigned_wallet: z.string(),
  capabilities: z.array(z.enum(CAPABILITIES)),
});
export type TokenRotationResponse = z.infer<typeof tokenRotationResponseSchema>;
