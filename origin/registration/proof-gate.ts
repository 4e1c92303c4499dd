import { err, ok, type Result } from "../../shared/result.ts";
import { AppError } from "../errors.ts";
import {
  checkProof,
  issueChallenge,
  PROOF_TTL_SECONDS,
  type ProofRefusal,
  proofKey,
  requiredProofBits,
} from "./proof-of-work.ts";
import type { RegistrationState } from "./quota-gate.ts";

export type ProofGateParams = {
  /** The request's X-svc-Registration-Proof header. */
  header: string | undefined;
  ipGroup: string;
  /** Today's UTC day and the state the request was judged on. */
  day: string;
  state: RegistrationState;
  now: Date;
};

/**
 * Off: every request passes (`undefined`). On: the count of the day the request's proof was bound
 * to (issuance checks under the policy lock that it still is the group's count), or why not.
 */
export type ProofVerdict = Result<number | undefined, ProofRefusal | "spent">;

/** The registration proof of work at the origin (docs/security.md, "Proof of work at registration"). */
export type ProofGate = {
  judge(params: ProofGateParams): ProofVerdict;
  /** 428 registration_proof_required with a fresh challenge for this group, at today's difficulty. */
  challenge(params: Omit<ProofGateParams, "header">): AppError;
};

/** `baseBits` 0 (AGENT_REGISTRATION_POW_BITS unset) turns the gate off. */
export function createProofGate(baseBits: number, ipSecret: string): ProofGate {
  const key = proofKey(ipSecret);
  return {
    judge(params) {
      if (baseBits === 0) return ok(undefined);
      const checked = checkProof(key, params);
      if (!checked.ok) return checked;
      // A challenge of another day, or one whose count has moved on since, made an identity already.
      if (checked.value.day !== params.day || checked.value.count !== params.state.ipGroupToday) {
        return err("spent");
      }
      return ok(checked.value.count);
    },
    challenge(params) {
      const { state } = params;
      const bits = requiredProofBits({
        baseBits,
        networkToday: state.networkToday,
        networkDaily: state.networkDaily,
      });
      const challenge = issueChallenge(key, {
        ipGroup: params.ipGroup,
        day: params.day,
        count: state.ipGroupToday,
        bits,
        now: params.now,
      });
      return new AppError(
        "registration_proof_required",
        `registration needs a proof of work of ${bits} bits: solve the challenge and send the request again with X-svc-Registration-Proof`,
        { fields: { challenge, bits, expires_in: PROOF_TTL_SECONDS } },
      );
    },
  };
}
