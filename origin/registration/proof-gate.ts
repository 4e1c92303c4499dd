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

/** The figures of the state a proof is judged against. */
export type ProofState = Pick<RegistrationState, "ipGroupToday" | "networkToday" | "networkDaily">;

/** A valid proof, and whether it still answers a state (issuance asks again under the policy lock). */
export type ProvenProof = {
  /**
   * The group's count of the day is still the one the challenge was bound to (one solution makes
   * one identity at most), and the day's fill asks for no more bits than the challenge carried (a
   * solution asked for while the day was emptier is not let in at the emptier day's price).
   */
  answers(state: ProofState): boolean;
};

/**
 * Off: every request passes (`undefined`). On: the proof (issuance checks under the policy lock
 * that it still answers the state), or why not: `spent` when the group's count has moved on,
 * `outpriced` when the day's fill now asks for more bits.
 */
export type ProofVerdict = Result<ProvenProof | undefined, ProofRefusal | "spent" | "outpriced">;

/** The registration proof of work at the origin (docs/security.md, "Proof of work at registration"). */
export type ProofGate = {
  judge(params: ProofGateParams): ProofVerdict;
  /** 428 registration_proof_required with a fresh challenge for this group, at today's difficulty. */
  challenge(params: Omit<ProofGateParams, "header">): AppError;
};

/** `baseBits` 0 (AGENT_REGISTRATION_POW_BITS unset) turns the gate off. */
export function createProofGate(baseBits: number, ipSecret: string): ProofGate {
  const key = proofKey(ipSecret);
  const requiredBits = (state: ProofState): number =>
    requiredProofBits({ baseBits, networkToday: state.networkToday, networkDaily: state.networkDaily });
  return {
    judge(params) {
      if (baseBits === 0) return ok(undefined);
      const checked = checkProof(key, params);
      if (!checked.ok) return checked;
      const { day, count, bits } = checked.value;
      // A challenge of another day, or one whose count has moved on since, made an identity already.
      if (day !== params.day || count !== params.state.ipGroupToday) return err("spent");
      const proven: ProvenProof = {
        answers: (state) => state.ipGroupToday === count && bits >= requiredBits(state),
      };
      if (!proven.answers(params.state)) return err("outpriced");
      return ok(proven);
    },
    challenge(params) {
      const { state } = params;
      const bits = requiredBits(state);
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
