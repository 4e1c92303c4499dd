import { HEADER_REGISTRATION, HEADER_REGISTRATION_PROOF } from "../shared/constants.ts";
import { MAX_PROOF_BITS, type ProofProgress, solveChallenge } from "../shared/registration-proof.ts";
import { REGISTRATION } from "./answer-shapes.ts";
import { GatewayError, UnexpectedAnswer } from "./errors.ts";
import { callJson, type FetchLike } from "./request.ts";
import type { RegisterResponse } from "./wire.ts";

export type { ProofProgress } from "../shared/registration-proof.ts";

export type RegisterParams = {
  /** The service's base URL, chain segment included: `https://host/77`. */
  baseUrl: string;
  fetch?: FetchLike;
  /**
   * Told about once a second while a proof of work is being solved (a service with the proof of
   * work on asks for one; the client solves it without being asked).
   */
  onProofOfWork?: (progress: ProofProgress) => void;
};

/**
 * Challenges answered before giving up: a solution can be spent by another registration of the
 * same address, or expire while it is being solved; each time the service sends a fresh challenge.
 */
const MAX_CHALLENGES = 3;

/**
 * POST {base}/agent/v1/register: a new token and an empty assigned wallet. Called once, never
 * retried (a lost answer may already have created the identity, and the token is shown
 * once). Store the token before anything else.
 *
 * A service with the proof of work on answers 428 `registration_proof_required` with a challenge
 * (docs/agents.md): nothing was created, so the request is sent again with the solution, found
 * here. That is not a retry of a request that may have succeeded.
 */
export async function register(params: RegisterParams): Promise<RegisterResponse> {
  const fetchFn = params.fetch ?? globalThis.fetch.bind(globalThis);
  let proof: string | undefined;
  for (let challenges = 0; ; challenges++) {
    try {
      const answer = await callJson(fetchFn, params.baseUrl, {
        method: "POST",
        path: "/agent/v1/register",
        headers: {
          [HEADER_REGISTRATION]: "1",
          ...(proof === undefined ? {} : { [HEADER_REGISTRATION_PROOF]: proof }),
        },
        body: {},
        shape: REGISTRATION,
      });
      return answer.body;
    } catch (error) {
      const challenge = challengeOf(error);
      if (challenge === undefined || challenges >= MAX_CHALLENGES) throw error;
      // The service asks for at most MAX_PROOF_BITS (origin/registration/proof-of-work.ts); more is
      // not its answer, and the solver would refuse it with a bare RangeError.
      if (!Number.isInteger(challenge.bits) || challenge.bits < 0 || challenge.bits > MAX_PROOF_BITS) {
        throw new UnexpectedAnswer(
          `the registration's proof of work asks for ${challenge.bits} bits, where the gateway asks for 0 to ${MAX_PROOF_BITS}: not the gateway's answer; nothing was created; is the base URL the gateway's (chain segment included)?`,
          { code: "unexpected_answer", status: error instanceof GatewayError ? error.status : undefined },
        );
      }
      const solution = await solveChallenge({ ...challenge, onProgress: params.onProofOfWork });
      proof = `${challenge.challenge}.${solution}`;
    }
  }
}

/** The challenge a 428 registration_proof_required carries, if `error` is one. */
function challengeOf(error: unknown): { challenge: string; bits: number } | undefined {
  if (!(error instanceof GatewayError) || error.code !== "registration_proof_required") return undefined;
  const { challenge, bits } = error.body;
  return typeof challenge === "string" && typeof bits === "number" ? { challenge, bits } : undefined;
}
