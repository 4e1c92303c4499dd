import { Hono } from "hono";
import type { RegistrationRefusalReason } from "../../shared/console-charts-schema.ts";
import { CHAIN_ID, HEADER_REGISTRATION_PROOF } from "../../shared/constants.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { isDatabaseUnavailable } from "../db/unavailable.ts";
import { AppError } from "../errors.ts";
import { createEdgeSecretVerifier } from "../http/edge-secret.ts";
import type { AppEnv } from "../http/env.ts";
import { ignoreRefusal, type RefusalCounter } from "../http/refusals.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { type KeyDemand, NO_KEY_DEMAND } from "../keypool/demand.ts";
import { route } from "../openapi/route.ts";
import { type AdmitAttemptResult, admitAttempt } from "./admission-repository.ts";
import { EarlyLimiter } from "./early-limiter.ts";
import { checkIngress } from "./ingress.ts";
import { type IssuanceRefusal, PUBLIC_CAPABILITIES } from "./issuance.ts";
import { type IssueWhenKeysResult, issueWhenKeys } from "./issue-when-keys.ts";
import { createProofGate, type ProofGate } from "./proof-gate.ts";
import { minuteStart, secondsToEndOfMinute, secondsToEndOfUtcDay, utcDay } from "./quota-clock.ts";
import { evaluateGate, onlyShortOfKeys, type RegistrationState, readQuotaState } from "./quota-gate.ts";
import { nodeRefusalOf, reportNodeRefusal } from "./refusal-report.ts";
import { checkRequestShape } from "./request-shape.ts";

type UnavailableReason = "disabled" | "paused" | "total_ceiling" | "key_reserve" | "unavailable";

/**
 * How long a registration short of keys waits for the refill, in all
 * (docs/operations.md#the-key-pool-refills-on-demand): a batch takes well under a second on an
 * idle enclave, and a minute's 120 admitted attempts need at most a dozen batches of 10.
 */
export const KEY_WAIT_MS = 10_000;

export type RegistrationRouterOptions = {
  /** This node's early limiter (origin/app.ts shares it with the console); a fresh one otherwise. */
  earlyLimiter?: EarlyLimiter;
  /** Told of each refusal by the early limiter or the persisted admission (metrics). */
  refusals?: RefusalCounter;
  /** Told of each refused registration, by why, at the infrastructure clock's time (the console's chart). */
  registrationRefused?: (reason: RegistrationRefusalReason, at: Date) => void;
  /** This node's key-pool refill, woken and waited on when keys run short; none by default. */
  keyDemand?: KeyDemand;
  /** How long a request short of keys waits for the refill (KEY_WAIT_MS by default). */
  keyWaitMs?: number;
};

/**
 * POST {base}/agent/v1/register (docs/api.md#registration-what-a-request-must-be), mounted outside
 * the gateway's bearer auth. In order, each step refusing before the next costs anything:
 *   1. the registration switch (503 disabled);
 *   2. ingress: the edge secret and a public X-svc-Registration-IP (403, nothing counted);
 *   3. the request's shape (400; 413 for a body over its limit, refused before it is read);
 *   3a. the early local limiter under the attempt limits this node read within the last second
 *      (429; in memory: past the minute's limit, a flood reads nothing);
 *   4. the policy and quota state, read only (503 paused / total_ceiling / key_reserve, 429 when
 *      a daily quota is spent; no counter moves). Short of keys only, on a node that can make
 *      them, the request goes on and the refill is woken;
 *   5. with AGENT_REGISTRATION_POW_BITS, the proof of work: one HMAC and two hashes (428 with a
 *      fresh challenge; no counter moves);
 *   6. the early local limiter (429; in memory, no persisted counter moves);
 *   7. admission: the persisted per-minute attempt counts, committed on their own (429);
 *   8. issuance: quotas and key assignment committed together under one lock (201, or 429/503/428);
 *      short of keys, it waits for the refill's next batch, bounded (issue-when-keys.ts).
 * Every answer carries Cache-Control: no-store; the token is never logged.
 */
export function createRegistrationRouter(
  deps: Infrastructure,
  options: RegistrationRouterOptions = {},
): Hono<AppEnv> {
  const { config, clock } = deps;
  const db = deps.database.db;
  const verifyEdge = createEdgeSecretVerifier(config.secrets.edgeShared);
  const earlyLimiter = options.earlyLimiter ?? new EarlyLimiter(() => clock.now().getTime());
  const refusals = options.refusals ?? ignoreRefusal;
  const registrationRefused = options.registrationRefused ?? (() => {});
  const refused = (reason: RegistrationRefusalReason): void => registrationRefused(reason, clock.now());
  const keyDemand = options.keyDemand ?? NO_KEY_DEMAND;
  const keyWaitMs = options.keyWaitMs ?? KEY_WAIT_MS;
  // Checked at the origin, not the edge: the difficulty follows the day's counts and a solution is
  // spent against the group's count, both in the database (docs/security.md).
  let proofGate: ProofGate | undefined;
  const router = new Hono<AppEnv>();
  // The answer is the refusal whatever the report's fate: a failed report is logged, and the next
  // refused request tries again.
  const reportRefusal = async (refusal: IssuanceRefusal, day: string): Promise<void> => {
    const refusing = nodeRefusalOf(refusal);
    if (!refusing) return;
    await reportNodeRefusal(db, { refusing, day }).catch((error: unknown) => {
      deps.logger.warn(
        { err: { message: errorMessage(error) }, refusing },
        "registration refusal not reported",
      );
    });
  };

  router.use("*", async (c, next) => {
    // Set before the answer exists, so error answers made by app.onError carry it too.
    c.header("Cache-Control", "no-store");
    await next();
  });

  route(router, "/agent/v1/register", "register", async (c) => {
    // The outcome goes on the request's one log line (request-context.ts); nothing of the response
    // (token, agent id, wallet) and never the client address.
    const log = (outcome: string, fields: Record<string, string | boolean> = {}): void =>
      c.set("logFields", { outcome, ...fields });
    // The answer says only `unavailable`, and app.onError never sees this error: the cause goes
    // to the log here, or an operator facing a run of 503s has nothing to go on.
    const databaseFailed = (stage: "state" | "admission" | "issuance", error: unknown): AppError => {
      const entry = { request_id: c.get("requestId"), stage, err: { message: errorMessage(error) } };
      if (isDatabaseUnavailable(error)) deps.logger.warn(entry, "registration unavailable");
      else deps.logger.error(entry, "registration unavailable");
      refused("unavailable");
      return unavailable("unavailable", error);
    };

    if (!config.features.publicRegistration || !config.secrets.registrationIp) {
      refused("disabled");
      throw unavailable("disabled");
    }
    const ingress = checkIngress((name) => c.req.header(name), {
      verifyEdge,
      ipSecret: config.secrets.registrationIp,
      allowLoopback: config.features.registrationAllowLoopback,
    });
    if (!ingress.ok) {
      log("ingress_refused", { refusal: ingress.error });
      refused("ingress");
      throw new AppError(
        "registration_ingress_refused",
        ingress.error === "no_edge_secret" || ingress.error === "wrong_edge_secret"
          ? "registration is accepted only through the edge"
          : "the client address is not accepted for registration",
      );
    }
    const shape = await checkRequestShape(c);
    if (!shape.ok) {
      refused("malformed");
      throw new AppError(shape.error.code, shape.error.message);
    }

    const ipGroup = ingress.value;
    // Past this node's attempt limits as the policy read a moment ago had them: refused before the
    // policy is read, so a flood once the minute's limit is used costs no database round trip.
    const flooded = earlyLimiter.refuseBeforeRead(ipGroup);
    if (flooded) {
      refusals("registration_early");
      log("refused", { stage: "early_limiter" });
      // Counted by reason as at step 6: a flood is refused here, and its chart must show it.
      refused("early_limiter");
      throw rateLimited(flooded.retryAfterSeconds);
    }

    const now = clock.now();
    const day = utcDay(now);
    let state: RegistrationState;
    try {
      state = await readQuotaState(db, { day, ipGroup });
    } catch (error) {
      log("refused", { stage: "state", refusal: "unavailable" });
      throw databaseFailed("state", error);
    }
    const gate = evaluateGate(state);
    // Short of keys and nothing else: counted and admitted like any request, it waits for the
    // refill at issuance rather than being refused while keys can be made.
    const waitForKeys = gate !== null && onlyShortOfKeys(state) && keyDemand.canMake();
    if (gate && !waitForKeys) {
      log("refused", { stage: "state", refusal: refusalName(gate) });
      refused(refusalName(gate));
      await reportRefusal(gate, day);
      throw refusalError(gate, day, now);
    }
    proofGate ??= createProofGate(config.registration.proofOfWorkBits, config.secrets.registrationIp);
    const proof = proofGate.judge({
      header: c.req.header(HEADER_REGISTRATION_PROOF),
      ipGroup,
      day,
      state,
      now,
    });
    if (!proof.ok) {
      log("refused", { stage: "proof", refusal: proof.error });
      refused("proof_required");
      throw proofGate.challenge({ ipGroup, day, state, now });
    }
    if (waitForKeys) keyDemand.wake({ keyReserve: state.keyReserve });

    const early = earlyLimiter.consume(ipGroup, {
      perIpGroup: state.attemptsPerIpPerMinute,
      global: state.attemptsGlobalPerMinute,
    });
    if (!early.allowed) {
      refusals("registration_early");
      log("refused", { stage: "early_limiter" });
      refused("early_limiter");
      throw rateLimited(early.retryAfterSeconds);
    }

    const minute = minuteStart(now);
    let admitted: AdmitAttemptResult;
    try {
      admitted = await admitAttempt(db, {
        minute,
        ipGroup,
        perIpLimit: state.attemptsPerIpPerMinute,
        globalLimit: state.attemptsGlobalPerMinute,
      });
    } catch (error) {
      log("refused", { stage: "admission", refusal: "unavailable" });
      throw databaseFailed("admission", error);
    }
    if (!admitted.ok) {
      refusals("registration_admission");
      log("refused", { stage: "admission", refusal: admitted.error, admitted: false });
      refused("admission");
      // Judged on the counts of `minute`, which may have ended while it waited for their row.
      throw rateLimited(secondsToEndOfMinute(minute, clock.now()));
    }

    let outcome: IssueWhenKeysResult;
    try {
      outcome = await issueWhenKeys(db, {
        day,
        ipGroup,
        keyReserve: state.keyReserve,
        batchSize: config.keyPool.batchSize,
        demand: keyDemand,
        waitMs: keyWaitMs,
        signal: c.req.raw.signal,
        proof: proof.value,
      });
    } catch (error) {
      log("refused", { stage: "issuance", refusal: "unavailable", admitted: true });
      throw databaseFailed("issuance", error);
    }
    const { issued, waitedMs } = outcome;
    const waited: Record<string, string> = waitedMs > 0 ? { key_wait_ms: String(waitedMs) } : {};
    if (issued === "client_gone") {
      // Nobody reads this answer. Its attempt was counted, as any admitted one
      // (docs/api.md#registration-quotas-and-counters); nothing was refused, so nothing is
      // reported or charted as a refusal.
      log("client_gone", { stage: "issuance", admitted: true, ...waited });
      throw unavailable("unavailable");
    }
    if (!issued.ok) {
      log("refused", { stage: "issuance", refusal: refusalName(issued.error), admitted: true, ...waited });
      refused(refusalName(issued.error));
      await reportRefusal(issued.error, day);
      if (issued.error.code === "proof_spent") {
        // Another request of the group made an identity with this solution first, or the day's
        // fill has since raised the bits above the solution's: a fresh challenge, bound to the
        // count and at the difficulty as they are now.
        const later = clock.now();
        const fresh = await readQuotaState(db, { day: utcDay(later), ipGroup }).catch((error: unknown) => {
          throw databaseFailed("issuance", error);
        });
        throw proofGate.challenge({ ipGroup, day: utcDay(later), state: fresh, now: later });
      }
      // Judged on the counts of `day`, which may have ended while it waited for the lock or keys.
      throw refusalError(issued.error, day, clock.now());
    }
    // The response is not logged, and the new agent id is part of it
    // (docs/api.md#what-registration-logs).
    log("issued", { stage: "issuance", admitted: true, ...waited });
    return c.json(
      {
        token: issued.value.token,
        agent_id: issued.value.agentId,
        assigned_wallet: issued.value.assignedWallet,
        capabilities: PUBLIC_CAPABILITIES,
        chain_id: CHAIN_ID,
      },
      201,
    );
  });

  // Any other method: the route does not exist, as at the edge.
  router.all("/", () => {
    throw new AppError("not_found", "no such route");
  });
  return router;
}

function refusalName(refusal: IssuanceRefusal): RegistrationRefusalReason {
  switch (refusal.code) {
    case "limited":
      return refusal.limit;
    case "unavailable":
      return refusal.reason;
    case "proof_spent":
      return "proof_spent";
  }
}

/** A spent daily quota of `day` waits for that day's end, as seen `now`; a state of the service waits for nothing. */
function refusalError(
  refusal: Exclude<IssuanceRefusal, { code: "proof_spent" }>,
  day: string,
  now: Date,
): AppError {
  return refusal.code === "limited"
    ? rateLimited(secondsToEndOfUtcDay(day, now))
    : unavailable(refusal.reason);
}

function unavailable(reason: UnavailableReason, cause?: unknown): AppError {
  return new AppError("registration_unavailable", "registration is unavailable", {
    cause,
    fields: { reason },
  });
}

/** 429 with Retry-After and `retry_after` (docs/api.md#registration-quotas-and-counters). */
function rateLimited(retryAfterSeconds: number): AppError {
  return new AppError("registration_rate_limited", "too many registrations; retry later", {
    headers: { "Retry-After": String(retryAfterSeconds) },
    fields: { retry_after: retryAfterSeconds },
  });
}
