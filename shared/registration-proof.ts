/**
 * The proof of work of public registration (docs/security.md, "Proof of work at registration"),
 * shared by the origin, which checks it, and the TypeScript client, which solves it.
 * Runtime-neutral: no `node:` imports (the client runs in browsers and workers too).
 *
 * The origin answers a registration without a valid proof 428 `registration_proof_required` with
 * a `challenge` and its `bits`. A solution is a whole number n, 0 ≤ n < 2^53, such that
 *   SHA-256(seed ‖ n as 8 bytes big-endian), seed = SHA-256("svc-registration-proof/v1" ‖ 0x00 ‖ challenge)
 * starts with at least `bits` zero bits: 2^bits hashes expected, one hash to check. The client
 * sends it again as `X-svc-Registration-Proof: <challenge>.<n>`.
 */
import { sha256 } from "@noble/hashes/sha2";

export const REGISTRATION_PROOF_LABEL = "svc-registration-proof/v1";

/** The most bits a challenge may ask for: 2^32 hashes, about an hour and a half for our client. */
export const MAX_PROOF_BITS = 32;

const encoder = new TextEncoder();

/** The 32 bytes every attempt at `challenge` starts with. */
export function proofSeed(challenge: string): Uint8Array {
  const label = encoder.encode(REGISTRATION_PROOF_LABEL);
  const text = encoder.encode(challenge);
  const message = new Uint8Array(label.length + 1 + text.length);
  message.set(label);
  message.set(text, label.length + 1);
  return sha256(message);
}

/** Zero bits at the start of `digest`, up to 32 (a challenge asks for no more). */
export function leadingZeroBits(digest: Uint8Array): number {
  const first = ((digest[0]! << 24) | (digest[1]! << 16) | (digest[2]! << 8) | digest[3]!) >>> 0;
  return Math.clz32(first);
}

/** One attempt: SHA-256 of the seed and the candidate, in a 40-byte buffer the caller reuses. */
function attemptDigest(buffer: Uint8Array, view: DataView, candidate: number): Uint8Array {
  view.setUint32(32, Math.floor(candidate / 2 ** 32));
  view.setUint32(36, candidate >>> 0);
  return sha256(buffer);
}

function attemptBuffer(challenge: string): { buffer: Uint8Array; view: DataView } {
  const buffer = new Uint8Array(40);
  buffer.set(proofSeed(challenge));
  return { buffer, view: new DataView(buffer.buffer) };
}

/** A solution's decimal form: digits only, no leading zero, below 2^53. */
const SOLUTION = /^(0|[1-9][0-9]{0,15})$/;

/** True when `solution` (decimal) solves `challenge` at `bits`: one hash. */
export function solvesChallenge(challenge: string, solution: string, bits: number): boolean {
  if (!SOLUTION.test(solution)) return false;
  const candidate = Number(solution);
  if (!Number.isSafeInteger(candidate)) return false;
  const { buffer, view } = attemptBuffer(challenge);
  return leadingZeroBits(attemptDigest(buffer, view, candidate)) >= bits;
}

/** How a solve is going: told every `progressEveryMs` while it runs. */
export type ProofProgress = { bits: number; attempts: number; elapsedMs: number };

export type SolveChallengeParams = {
  challenge: string;
  bits: number;
  onProgress?: (progress: ProofProgress) => void;
  /** How often onProgress is told (1000 ms by default). */
  progressEveryMs?: number;
  /** The clock of the progress reports (performance.now by default). */
  now?: () => number;
};

/** Attempts between two looks at the clock; each look also yields to the event loop. */
const SLICE = 1 << 14;

/**
 * The smallest solution of `challenge` at `bits`, searched from 0, in slices that yield to the
 * event loop between them (a browser tab or a CLI's timers keep running). 2^bits attempts expected.
 */
export async function solveChallenge(params: SolveChallengeParams): Promise<string> {
  const { challenge, bits } = params;
  if (!Number.isInteger(bits) || bits < 0 || bits > MAX_PROOF_BITS) {
    throw new RangeError(`a registration challenge asks for 0 to ${MAX_PROOF_BITS} bits, not ${bits}`);
  }
  const now = params.now ?? (() => performance.now());
  const every = params.progressEveryMs ?? 1_000;
  const started = now();
  let reported = started;
  const { buffer, view } = attemptBuffer(challenge);
  for (let candidate = 0; candidate < Number.MAX_SAFE_INTEGER; ) {
    const end = candidate + SLICE;
    for (; candidate < end; candidate++) {
      if (leadingZeroBits(attemptDigest(buffer, view, candidate)) >= bits) return String(candidate);
    }
    const at = now();
    if (params.onProgress && at - reported >= every) {
      reported = at;
      params.onProgress({ bits, attempts: candidate, elapsedMs: at - started });
    }
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }
  throw new Error("no solution below 2^53");
}
