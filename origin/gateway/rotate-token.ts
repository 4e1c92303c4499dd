/**
 * POST {base}/agent/v1/token/rotate: the caller's token replaced by a new one, shown once, for the
 * same identity (docs/agents.md, "Rotating the token"). Any valid token may rotate itself, whatever
 * its capabilities: the token is the identity's way in, not one of its powers. The request counts
 * in the per-agent tier like any other, keyed by the agent id, so a new token starts no new window.
 */
import type { Handler } from "hono";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import type { TokenRotationResponse } from "../../shared/token-schemas.ts";
import { tokenRotationRequestSchema } from "../../shared/token-schemas.ts";
import { rotateToken } from "../auth/rotate-token.ts";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";

export function rotateTokenHandler(db: Db): Handler<AppEnv> {
  return async (c) => {
    await parseJsonBody(c, tokenRotationRequestSchema, 1_024);
    const agent = c.get("agent");
    // Authenticated by bearerAuth: the header holds a well-formed token of this agent.
    const presented = parseBearerHeader(c.req.header("authorization"));
    if (!presented) throw new AppError("agent_auth_failed", "authentication failed");
    const rotated = await rotateToken(db, { agentId: agent.agentId, presentedTokenId: presented.tokenId });
    if (!rotated.ok) {
      // Another rotation replaced this token, or the identity was revoked, after the token was
      // read: the token no longer works, said as every failed authentication is (no oracle).
      switch (rotated.error) {
        case "token_replaced":
        case "revoked":
        case "not_found":
          throw new AppError("agent_auth_failed", "authentication failed");
      }
    }
    const { token, agentId, assignedWallet, capabilities } = rotated.value;
    const body: TokenRotationResponse = {
      token,
      agent_id: agentId,
      assigned_wallet: assignedWallet,
      capabilities,
    };
    // Shown once: never stored by a cache on the way (the edge passes this header on).
    return c.json(body, 200, { "cache-control": "no-store" });
  };
}
