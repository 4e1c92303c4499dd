import { bearerCredentials } from "./authorization.ts";

/**
 * An agent's token is `agt_<token_id>_<secret>`, a 16-byte id and a 32-byte secret in lowercase
 * hex. The origin and the edge parse it alike: the edge reads only the id (edge-worker/lockouts.ts).
 */
const TOKEN_PATTERN = /^agt_([0-9a-f]{32})_([0-9a-f]{64})$/;

export type ParsedToken = { tokenId: string; secret: string };

/** Parses an `Authorization` header value; anything but a bearer `agt_…` of the exact shape is null. */
export function parseBearerHeader(header: string | null | undefined): ParsedToken | null {
  const match = TOKEN_PATTERN.exec(bearerCredentials(header ?? undefined) ?? "");
  return match ? { tokenId: match[1]!, secret: match[2]! } : null;
}
