import { HEADER_EDGE_SECRET, HEADER_REGISTRATION_IP } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import type { EdgeSecretVerifier } from "../http/edge-secret.ts";
import { classifyRegistrationIp, hashIpGroup } from "./ip-classification.ts";

/** Why ingress was refused: kept for the log, collapsed into one wire code (403). */
export type IngressRefusal =
  | "no_edge_secret"
  | "wrong_edge_secret"
  | "missing_ip"
  | "malformed_ip"
  | "not_public_ip";

/** The caller's hashed address group, or why it is not let in. */
export type IngressResult = Result<string, IngressRefusal>;

export type CheckIngressParams = {
  verifyEdge: EdgeSecretVerifier;
  ipSecret: string;
  allowLoopback: boolean;
};

/**
 * A registration must come from the edge (docs/api.md#registration-what-a-request-must-be: its
 * shared secret, compared in constant time) and carry the client address the edge saw in
 * X-svc-Registration-IP, one public address. Nothing here reads the database or a counter, so a
 * refusal consumes neither a key nor a count. The address leaves this function only as its group's
 * HMAC.
 */
export function checkIngress(
  header: (name: string) => string | undefined,
  params: CheckIngressParams,
): IngressResult {
  const secret = header(HEADER_EDGE_SECRET);
  if (secret === undefined) return err("no_edge_secret");
  if (!params.verifyEdge(secret)) return err("wrong_edge_secret");
  const ip = classifyRegistrationIp(header(HEADER_REGISTRATION_IP), { allowLoopback: params.allowLoopback });
  if (!ip.ok) {
    const refusal =
      ip.error === "missing" ? "missing_ip" : ip.error === "malformed" ? "malformed_ip" : "not_public_ip";
    return err(refusal);
  }
  return ok(hashIpGroup(params.ipSecret, ip.value.group));
}
