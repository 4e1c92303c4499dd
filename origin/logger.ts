import pino, { type Logger } from "pino";
import { boundedLogDestination } from "../shared/node/unread-output.ts";

export type { Logger };

/**
 * JSON logs, on stdout unless given a destination, at most LOG_QUEUE_MAX_BYTES of them held for a
 * reader that stalls (shared/node/unread-output.ts). Redaction is a second line of defence: code
 * never passes headers, tokens or secrets to the logger in the first place (docs/security.md).
 */
export function createLogger(
  level: string,
  destination: pino.DestinationStream = boundedLogDestination(1, "origin"),
): Logger {
  return pino(
    {
      level,
      base: { service: "origin" },
      redact: {
        paths: [
          "authorization",
          "*.authorization",
          "headers",
          "*.headers",
          "token",
          "*.token",
          "secret",
          "*.secret",
          "password",
          "*.password",
          "*.secrets",
          "secrets",
          '["x-admin-api-token"]',
          '*["x-admin-api-token"]',
          '["x-registration-admin-token"]',
          '*["x-registration-admin-token"]',
          '["x-console-session"]',
          '*["x-console-session"]',
          '["x-svc-edge-secret"]',
          '*["x-svc-edge-secret"]',
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}
