import type { Capability } from "../../shared/constants.ts";
import type { Operator } from "../../shared/operator.ts";

/** The identity behind a verified bearer token, for the rest of the request. */
export type AuthenticatedAgent = {
  agentId: string;
  assignedWallet: `0x${string}`;
  keyRef: string;
  capabilities: readonly Capability[];
  /** The agent has a spending policy (docs/agents.md#your-spending-policy). */
  hasPolicy: boolean;
};

/** Hono context variables set by the origin's middleware. */
export type AppEnv = {
  Variables: {
    requestId: string;
    clientIp: string;
    /** The request came from the edge: it carried a valid edge secret and the client's address. */
    viaEdge: boolean;
    agent: AuthenticatedAgent;
    /** The id of the bearer token the request authenticated with (not its secret): per-token caps. */
    tokenId: string;
    /**
     * Who a console request came from: the operator a session names, or null for the shared admin
     * tokens (docs/operations.md#signing-in-with-a-passkey). The audit records it with each change.
     */
    operator: Operator | null;
    /** Extra fields for the request's one log line (e.g. a registration's outcome); never secrets. */
    logFields: Record<string, string | boolean>;
    /** Set by the app's not-found handler: the request matched no route (metrics label). */
    routeUnmatched: boolean;
  };
};
