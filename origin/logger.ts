import pino, { type Logger } from "pino";

export type { Logger };

/**
 * JSON logs. Redaction is a second line of defence: code never passes headers, tokens or
 * secrets to the logger in the first place (docs/security.md).
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
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
