import type { AuthenticationResponseJSON } from "@simplewebauthn/server";
import type { Handler, MiddlewareHandler } from "hono";
import { HEADER_CONSOLE_SESSION } from "../../shared/constants.ts";
import {
  type SessionStarted,
  type SessionsEnded,
  type SessionView,
  sessionRequestSchema,
} from "../../shared/passkey-schemas.ts";
import { SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import { AppError } from "../errors.ts";
import { addressGroup } from "../http/client-ip.ts";
import type { AppEnv } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { endOperatorSessions, endSession, findLiveSession, startSession } from "../passkeys/sessions.ts";
import { createPasskeySignIn, type SignInRefusal } from "../passkeys/sign-in.ts";
import type { AdminAuth } from "./admin-auth.ts";

/** An assertion carries a few hundred bytes of authenticator data, client data and signature. */
const MAX_BODY = 16_384;

/**
 * Ours: sign-in ceremonies one client (IPv4 address or IPv6 /64) may open per 60 s. Opening one
 * needs no credential; what keeps a few clients from crowding out another's open challenge is
 * each client's share of them (OPEN_PER_CLIENT), and this bounds the work a client makes.
 */
export const SIGN_IN_OPTIONS = { limit: 30, windowSeconds: 60 } as const;

/**
 * Signing in to the console with an enrolled passkey (docs/operations.md#signing-in-with-a-passkey):
 * options and the assertion need no token (they are how an operator gets one); a refused assertion
 * counts as a failed admin authentication of the client, with the same 401 and 429. Who is signed
 * in, signing out and signing out everywhere go through the console's read guard, with the session
 * itself.
 */
export function sessionConsoleHandlers(
  deps: Infrastructure,
  auth: AdminAuth,
): {
  optionsLimit: MiddlewareHandler<AppEnv>;
  options: Handler<AppEnv>;
  start: Handler<AppEnv>;
  show: Handler<AppEnv>;
  end: Handler<AppEnv>;
  endEverywhere: Handler<AppEnv>;
} {
  const db = deps.database.db;
  const signIn = createPasskeySignIn(db, deps.config.console);
  const opened = new SlidingWindowLimiter({ ...SIGN_IN_OPTIONS, maxKeys: 10_000 });
  return {
    optionsLimit: async (c, next) => {
      const decision = opened.consume(addressGroup(c.get("clientIp")));
      if (!decision.allowed) {
        throw new AppError("rate_limited", "too many sign-ins started; retry later", {
          headers: { "Retry-After": String(decision.retryAfterSeconds) },
          fields: { retry_after: decision.retryAfterSeconds },
        });
      }
      await next();
    },
    async options(c) {
      return c.json({ options: await signIn.options(addressGroup(c.get("clientIp"))) });
    },
    async start(c) {
      const body = await parseJsonBody(c, sessionRequestSchema, MAX_BODY);
      const verified = await signIn.verify(body.response as unknown as AuthenticationResponseJSON);
      if (!verified.ok) {
        c.set("logFields", { outcome: "sign_in_refused", reason: verified.error.code });
        throw refusal(verified.error, auth.failure(c));
      }
      const session = await startSession(db, verified.value);
      c.set("logFields", { outcome: "signed_in", key_id: session.operator.keyId });
      const response: SessionStarted = {
        token: session.token,
        operator: session.operator.name,
        key_id: session.operator.keyId,
        expires_at: session.expiresAt.toISOString(),
      };
      return c.json(response, 201);
    },
    async show(c) {
      const operator = c.get("operator");
      const token = c.req.header(HEADER_CONSOLE_SESSION);
      const session = operator && token !== undefined ? await findLiveSession(db, token) : null;
      const response: SessionView = {
        operator: session?.operator.name ?? null,
        key_id: session?.operator.keyId ?? null,
        expires_at: session?.expiresAt.toISOString() ?? null,
      };
      return c.json(response);
    },
    async end(c) {
      const token = c.req.header(HEADER_CONSOLE_SESSION);
      if (c.get("operator") === null || token === undefined)
        throw new AppError(
          "validation_failed",
          `sign out ends the session sent as ${HEADER_CONSOLE_SESSION}`,
        );
      await endSession(db, token);
      c.set("logFields", { outcome: "signed_out" });
      return c.body(null, 204);
    },
    async endEverywhere(c) {
      const operator = c.get("operator");
      if (operator === null)
        throw new AppError(
          "validation_failed",
          `signing out everywhere ends the sessions of the operator signed in with ${HEADER_CONSOLE_SESSION}`,
        );
      const response: SessionsEnded = {
        operator: operator.name,
        ended: await endOperatorSessions(db, operator.name),
      };
      c.set("logFields", {
        outcome: "signed_out_everywhere",
        key_id: operator.keyId,
        ended: String(response.ended),
      });
      return c.json(response);
    },
  };
}

/**
 * Every refusal is the failure the client's count took (401, or 429 past the limit), with one body
 * whatever failed, except for the holder of a pending passkey: its assertion verified, so saying it
 * awaits enrollment tells no one else anything.
 */
function refusal(error: SignInRefusal, counted: AppError): AppError {
  switch (error.code) {
    case "not_enrolled":
      if (counted.code !== "admin_auth_failed") return counted;
      return new AppError(
        "admin_auth_failed",
        `passkey ${error.keyId} is registered but not enrolled: the policy authority enrolls it (npm run enclave-policy -- enroll-passkey ${error.keyId})`,
      );
    // A revoked passkey's holder may be whoever took the device: told nothing more than a stranger.
    case "revoked":
    case "unknown_passkey":
    case "does_not_verify":
    case "stale_counter":
      return counted;
  }
}
