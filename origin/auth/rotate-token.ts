/**
 * A new token for an identity, the old one gone in the same transaction (docs/agents.md, "Rotating
 * the token"; docs/security.md, "Token rotation"). The wallet, the capabilities, the actions and
 * the limits belong to the identity, keyed by its agent id, and stay; the token is only the way in.
 * Bearer authentication reads the token on every request, so the old one fails from the next
 * request on; a request it authenticated before the commit finishes as it began.
 */
import { eq, sql } from "drizzle-orm";
import type { Capability } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import type { Db } from "../db/client.ts";
import { transactionAnsweringLostCommit } from "../db/lost-commit.ts";
import { agentIdentities, agentTokens } from "../db/schema.ts";
import { issueToken } from "./token.ts";

export type RotateTokenParams = {
  agentId: string;
  /**
   * The token the agent presented (its own rotation): the rotation happens only while that token
   * is still the identity's, so two rotations sent with one token issue one new token, and a token
   * replaced meanwhile cannot replace its successor. Absent for the operator, who replaces any.
   */
  presentedTokenId?: string;
};

export type RotatedToken = {
  /** The whole bearer token: shown once, never stored (only its hash) or logged. */
  token: string;
  agentId: string;
  assignedWallet: string;
  capabilities: Capability[];
  /** A disabled identity keeps its state: its new token works once an operator enables it. */
  enabled: boolean;
};

export type RotateTokenError =
  | "not_found"
  /** Revocation is final: no new token brings a revoked identity back. */
  | "revoked"
  /** The presented token is no longer the identity's (another rotation came first). */
  | "token_replaced";

/**
 * Under the identity's row lock, so rotations of one identity run one after the other: checks the
 * presented token, deletes every token of the identity and stores the hash of a new one. A commit
 * whose answer the lost database link took is answered with its token when it went through
 * (db/lost-commit.ts); CommitOutcomeUnknown is thrown when that cannot be learnt.
 */
export async function rotateToken(
  db: Db,
  params: RotateTokenParams,
): Promise<Result<RotatedToken, RotateTokenError>> {
  // The old token is gone once this commits, and the new one is shown nowhere but in its answer:
  // a commit whose answer a lost link took would leave the identity with no token anyone holds.
  return transactionAnsweringLostCommit(
    db,
    async (tx, committing): Promise<Result<RotatedToken, RotateTokenError>> => {
      const [identity] = await tx
        .select({
          assignedWallet: agentIdentities.assignedWallet,
          capabilities: agentIdentities.capabilities,
          enabled: agentIdentities.enabled,
          revoked: agentIdentities.revoked,
        })
        .from(agentIdentities)
        .where(eq(agentIdentities.agentId, params.agentId))
        .for("update");
      if (!identity) return err("not_found");
      if (identity.revoked) return err("revoked");
      const replaced = await tx
        .select({ tokenId: agentTokens.tokenId })
        .from(agentTokens)
        .where(eq(agentTokens.agentId, params.agentId));
      if (
        params.presentedTokenId !== undefined &&
        !replaced.some((row) => row.tokenId === params.presentedTokenId)
      ) {
        return err("token_replaced");
      }
      const issued = issueToken();
      await tx.delete(agentTokens).where(eq(agentTokens.agentId, params.agentId));
      await tx
        .insert(agentTokens)
        .values({ tokenId: issued.tokenId, agentId: params.agentId, secretHash: issued.secretHash });
      const rotated = ok({
        token: issued.token,
        agentId: params.agentId,
        assignedWallet: identity.assignedWallet,
        capabilities: identity.capabilities as Capability[],
        enabled: identity.enabled,
      });
      return committing(rotated, {
        // The rotation held the identity's row lock from its first statement until its end.
        awaitEnd: sql`select 1 from agent_identities where agent_id = ${params.agentId}::uuid for share`,
        made: sql`select 1 from agent_tokens where token_id = ${issued.tokenId}`,
      });
    },
  );
}
