import { createHmac, timingSafeEqual } from "node:crypto";
import { MAX_PROOF_BITS, solvesChallenge } from "../../shared/registration-proof.ts";
import { err, ok, type Result } from "../../shared/result.ts";

/**
 * The origin's side of the registration proof of work (docs/security.md, "Proof of work at
 * registration"; the hash and its check are shared/registration-proof.ts). A challenge is
 *   v1.<day>.<count>.<bits>.<expires>.<mac>
 * where day is the UTC day, count the client's IP group's registrations of that day, bits the
 * difficulty, expires unix seconds, and mac the first 16 bytes of HMAC-SHA256, under a key derived
 * from AGENT_REGISTRATION_IP_SECRET, of the IP group and those fields. So a challenge:
 *   - is the origin's own (nobody else can make a MAC) and stateless (nothing is stored);
 *   - is good for the IP group it was given to only, and until it expires;
 *   - is spent by the first registration it carries to success: the group's count moves on, and
 *     issuance checks under the policy lock that the count is still the challenge's.
 * Checking costs one HMAC and two SHA-256 hashes, before any database read.
 */

/**
 * How long a challenge may be answered: ten minutes, over twice the average time our client (about
 * a million hashes a second) takes for 28 bits. The count binding, not the expiry, stops a replay.
 */
export const PROOF_TTL_SECONDS = 600;

/** The most the day's fill adds to the configured difficulty (eight halvings of the quota). */
export const MAX_EXTRA_BITS = 8;

/** The fields a valid proof was bound to. */
export type ProvenChallenge = { day: string; count: number; bits: number };

/** Why a proof was not accepted; each is answered with a fresh challenge. */
export type ProofRefusal = "missing" | "malformed" | "forged" | "expired" | "unsolved";

/** The key challenges are authenticated with: AGENT_REGISTRATION_IP_SECRET, domain-separated. */
export function proofKey(ipSecret: string): Buffer {
  return createHmac("sha256", ipSecret).update("svc-registration-proof/v1 challenge key").digest();
}

export type RequiredProofBitsParams = {
  /** AGENT_REGISTRATION_POW_BITS; 0 turns the proof of work off. */
  baseBits: number;
  /** Registrations issued network-wide today, and the day's network-wide quota. */
  networkToday: number;
  networkDaily: number;
};

/**
 * docs/configuration.md: the configured bits, plus one for each halving of what is left of the
 * day's network-wide quota (half left: +1, a quarter: +2, an eighth: +3, …), at most
 * MAX_EXTRA_BITS more and MAX_PROOF_BITS in all. Each halving doubles the expected work, so the
 * last registrations of a day cost the most, and filling a day costs a multiple of its quota.
 */
export function requiredProofBits(params: RequiredProofBitsParams): number {
  const { baseBits, networkToday, networkDaily } = params;
  if (baseBits <= 0) return 0;
  const left = Math.max(1, networkDaily - networkToday);
  const extra = networkDaily > left ? Math.floor(Math.log2(networkDaily / left)) : 0;
  return Math.min(MAX_PROOF_BITS, baseBits + Math.min(MAX_EXTRA_BITS, extra));
}

export type IssueChallengeParams = ProvenChallenge & { ipGroup: string; now: Date };

/** A challenge for `ipGroup`, valid for PROOF_TTL_SECONDS from `now`. */
export function issueChallenge(key: Buffer, params: IssueChallengeParams): string {
  const expires = Math.floor(params.now.getTime() / 1000) + PROOF_TTL_SECONDS;
  const fields = `v1.${params.day}.${params.count}.${params.bits}.${expires}`;
  return `${fields}.${mac(key, params.ipGroup, fields).toString("hex")}`;
}

export type CheckProofParams = {
  /** The X-svc-Registration-Proof header: `<challenge>.<solution>`. */
  header: string | undefined;
  ipGroup: string;
  now: Date;
};

const PROOF =
  /^(v1\.(\d{4}-\d{2}-\d{2})\.(0|[1-9]\d{0,8})\.([1-9]\d?)\.(\d{1,12}))\.([0-9a-f]{32})\.(\d{1,16})$/;

/**
 * The challenge a proof answers, if the origin issued it to this IP group, it has not expired and
 * the solution solves it. Whether it is still unspent is for the caller (its day and count
 * against the database's).
 */
export function checkProof(key: Buffer, params: CheckProofParams): Result<ProvenChallenge, ProofRefusal> {
  if (params.header === undefined || params.header === "") return err("missing");
  const parsed = PROOF.exec(params.header.trim());
  if (!parsed) return err("malformed");
  const [, fields, day, count, bits, expires, tag, solution] = parsed as unknown as string[];
  const expected = mac(key, params.ipGroup, fields!);
  const given = Buffer.from(tag!, "hex");
  if (!timingSafeEqual(expected, given)) return err("forged");
  if (Number(expires) < params.now.getTime() / 1000) return err("expired");
  const challenge = `${fields}.${tag}`;
  if (!solvesChallenge(challenge, solution!, Number(bits))) return err("unsolved");
  return ok({ day: day!, count: Number(count), bits: Number(bits) });
}

function mac(key: Buffer, ipGroup: string, fields: string): Buffer {
  return createHmac("sha256", key).update(`${ipGroup}\0${fields}`).digest().subarray(0, 16);
}
