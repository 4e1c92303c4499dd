/** The console's passkey routes (docs/operations.md#passkeys) in the route table (operations.ts). */
import {
  approvalOptionsRequestSchema,
  approvalOptionsSchema,
  approvalRequestSchema,
  approvalResultSchema,
  passkeyRegistrationOptionsRequestSchema,
  passkeyRegistrationOptionsSchema,
  passkeyRegistrationRequestSchema,
  passkeyRevokeRequestSchema,
  passkeySchema,
  passkeysSchema,
  sessionOptionsSchema,
  sessionRequestSchema,
  sessionStartedSchema,
  sessionsEndedSchema,
  sessionViewSchema,
} from "../../shared/passkey-schemas.ts";
import { adminRateLimited, errorResponse, type Operation, PAYLOAD_TOO_LARGE } from "./operation-types.ts";

const errors = {
  400: errorResponse("validation_failed: the body, the registration response or the assertion is malformed"),
  401: errorResponse("admin_auth_failed: a missing or wrong admin token"),
  403: errorResponse(
    "policy_loosening_requires_operator: the enclave refused the passkey's approval (`detail` names the check)",
  ),
  404: errorResponse(
    "not_found: no such action, agent or passkey (or feature_disabled: the console or the signer is off)",
  ),
  409: errorResponse("idempotency_conflict: the action is no longer held"),
  413: PAYLOAD_TOO_LARGE,
  429: adminRateLimited("rate_limited: too many failed admin authentications from this address"),
  500: errorResponse("internal_error"),
  503: errorResponse("agent_signer_unavailable: the enclave did not answer"),
};
const change = ["adminApiToken", "registrationAdminToken"] as const;

const signInErrors = {
  401: errorResponse(
    "admin_auth_failed: the assertion does not verify against an enrolled passkey (unknown, pending, wrong origin or challenge, stale counter)",
  ),
  404: errorResponse("feature_disabled: the console is off on this node (no AGENT_ADMIN_API_TOKEN)"),
  429: adminRateLimited("rate_limited: too many failed admin authentications or sign-ins from this address"),
  500: errors[500],
};

export const PASSKEY_OPERATIONS: readonly Operation[] = [
  {
    method: "post",
    path: "/admin/agents/session/options",
    operationId: "consoleSessionOptions",
    capability: "console",
    summary: "Start signing in to the console with an enrolled passkey: the WebAuthn request options.",
    tag: "console",
    security: [],
    responses: {
      200: { description: "the options", body: { name: "SessionOptions", schema: sessionOptionsSchema } },
      404: signInErrors[404],
      429: signInErrors[429],
      500: signInErrors[500],
    },
  },
  {
    method: "post",
    path: "/admin/agents/session",
    operationId: "consoleSignIn",
    capability: "console",
    summary:
      "Sign in with an enrolled passkey's assertion: a session token, answered once, good for 8 hours or until signed out.",
    tag: "console",
    security: [],
    requestBody: { name: "SessionRequest", schema: sessionRequestSchema },
    responses: {
      201: { description: "signed in", body: { name: "SessionStarted", schema: sessionStartedSchema } },
      400: errorResponse("validation_failed: the body is malformed"),
      413: PAYLOAD_TOO_LARGE,
      ...signInErrors,
    },
  },
  {
    method: "get",
    path: "/admin/agents/session",
    operationId: "consoleSession",
    capability: "console",
    summary:
      "Who is signed in: the session's operator, passkey and expiry (all null under the admin tokens).",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: { description: "the session", body: { name: "SessionView", schema: sessionViewSchema } },
      401: errors[401],
      404: signInErrors[404],
      429: errors[429],
      500: errors[500],
    },
  },
  {
    method: "delete",
    path: "/admin/agents/session",
    operationId: "consoleSignOut",
    capability: "console",
    summary:
      "Sign out: ends the session sent as x-console-session; its token is refused from the next request.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      204: { description: "signed out" },
      400: errorResponse("validation_failed: no session was sent (the admin tokens have nothing to end)"),
      401: errors[401],
      404: signInErrors[404],
      429: errors[429],
      500: errors[500],
    },
  },
  {
    method: "post",
    path: "/admin/agents/session/end-all",
    operationId: "consoleSignOutEverywhere",
    capability: "console",
    summary:
      "Sign out everywhere: ends every live session of the operator signed in with x-console-session, this one too; each token is refused from the next request.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: {
        description: "signed out everywhere",
        body: { name: "SessionsEnded", schema: sessionsEndedSchema },
      },
      400: errorResponse("validation_failed: no session was sent (the admin tokens name no operator)"),
      401: errors[401],
      404: signInErrors[404],
      429: errors[429],
      500: errors[500],
    },
  },
  {
    method: "get",
    path: "/admin/agents/passkeys",
    operationId: "consolePasskeys",
    capability: "console",
    summary:
      "The operators' passkeys the console registered, newest first: pending until the policy authority enrolls them, or enrolled.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: { description: "the passkeys", body: { name: "Passkeys", schema: passkeysSchema } },
      401: errors[401],
      404: errorResponse("feature_disabled: the console is off on this node (no AGENT_ADMIN_API_TOKEN)"),
      429: errors[429],
      500: errors[500],
      503: errorResponse("service_unavailable: the database does not answer; a retry later is safe"),
    },
  },
  {
    method: "post",
    path: "/admin/agents/passkeys/registration/options",
    operationId: "consolePasskeyRegistrationOptions",
    capability: "console",
    summary:
      "Start registering an operator's passkey: the WebAuthn creation options. Signed in with a passkey, under the signed-in operator's name only.",
    tag: "console",
    security: [...change],
    requestBody: {
      name: "PasskeyRegistrationOptionsRequest",
      schema: passkeyRegistrationOptionsRequestSchema,
    },
    responses: {
      200: {
        description: "the options",
        body: { name: "PasskeyRegistrationOptions", schema: passkeyRegistrationOptionsSchema },
      },
      ...errors,
      400: errorResponse("validation_failed: the body is malformed, or a session names another operator"),
    },
  },
  {
    method: "post",
    path: "/admin/agents/passkeys/registration",
    operationId: "consolePasskeyRegistration",
    capability: "console",
    summary:
      "Finish registering a passkey: kept pending until the policy authority enrolls it; the answer is the row kept.",
    tag: "console",
    security: [...change],
    requestBody: { name: "PasskeyRegistrationRequest", schema: passkeyRegistrationRequestSchema },
    responses: {
      201: { description: "the pending passkey", body: { name: "Passkey", schema: passkeySchema } },
      ...errors,
      400: errorResponse(
        "validation_failed: the body or the registration response is malformed or does not verify, or a session names another operator",
      ),
      409: errorResponse(
        "idempotency_conflict: the credential or its key is registered already (the message names the passkey kept); nothing changed",
      ),
    },
  },
  {
    method: "post",
    path: "/admin/agents/approvals/options",
    operationId: "consoleApprovalOptions",
    capability: "console",
    summary:
      "What a passkey will approve (the shown document), its challenge and the WebAuthn request options.",
    tag: "console",
    security: [...change],
    requestBody: { name: "ApprovalOptionsRequest", schema: approvalOptionsRequestSchema },
    responses: {
      200: {
        description: "the approval to sign",
        body: { name: "ApprovalOptions", schema: approvalOptionsSchema },
      },
      ...errors,
    },
  },
  {
    method: "post",
    path: "/admin/agents/approvals",
    operationId: "consoleApproval",
    capability: "console",
    summary: "Relay a passkey's assertion to the enclave with the change it approves.",
    tag: "console",
    security: [...change],
    requestBody: { name: "ApprovalRequest", schema: approvalRequestSchema },
    responses: {
      200: { description: "approved", body: { name: "ApprovalResult", schema: approvalResultSchema } },
      ...errors,
    },
  },
  {
    method: "post",
    path: "/admin/agents/passkeys/{key_id}/revoke",
    operationId: "consolePasskeyRevoke",
    capability: "console",
    summary:
      "Revoke an operator's passkey, with a reason: the enclave refuses its approvals (passkey_revoked), it signs no one in, the sessions it signed in end, and it is never enrolled again. A passkey revoked already is answered as it is.",
    tag: "console",
    security: [...change],
    requestBody: { name: "PasskeyRevokeRequest", schema: passkeyRevokeRequestSchema },
    responses: {
      200: { description: "the revoked passkey", body: { name: "Passkey", schema: passkeySchema } },
      400: errorResponse(
        "validation_failed: the reason is missing or malformed, or the enclave refused the revoke",
      ),
      401: errors[401],
      404: errorResponse(
        "not_found: no passkey registered under that key id (or feature_disabled: the console is off, or an enrolled passkey's node has no enclave or admin key)",
      ),
      413: PAYLOAD_TOO_LARGE,
      429: errors[429],
      500: errors[500],
      503: errorResponse(
        "agent_signer_unavailable: the enclave did not answer; nothing was marked, run it again",
      ),
    },
  },
];
