import { describe, expect, it } from "vitest";
import { createLogger } from "./logger.ts";

// Logs never carry tokens or secrets (docs/security.md). Code never passes them to the logger; redaction
// is the second line of defence, so these calls pass them on purpose and read what comes out.

const TOKEN = `agt_${"1".repeat(32)}_${"2".repeat(64)}`;
const SECRET = "s".repeat(40);
const PASSWORD = "p".repeat(40);

function capture(): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const logger = createLogger("info", { write: (line: string) => void lines.push(line) });
  return { lines, logger };
}

describe("log redaction", () => {
  it("redacts a token, a secret, a password and an Authorization header at the top level", () => {
    const { lines, logger } = capture();
    logger.info({ token: TOKEN, secret: SECRET, password: PASSWORD, authorization: `Bearer ${TOKEN}` }, "x");
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(entry).toMatchObject({
      token: "[redacted]",
      secret: "[redacted]",
      password: "[redacted]",
      authorization: "[redacted]",
    });
  });

  it("redacts them one level down, and a whole headers object", () => {
    const { lines, logger } = capture();
    logger.info(
      {
        req: { headers: { authorization: `Bearer ${TOKEN}` }, authorization: `Bearer ${TOKEN}` },
        registration: { token: TOKEN },
        config: { secret: SECRET, secrets: { edge: SECRET } },
        headers: { authorization: `Bearer ${TOKEN}`, "x-admin-api-token": SECRET },
      },
      "x",
    );
    const line = lines[0]!;
    expect(line).not.toContain(TOKEN);
    expect(line).not.toContain(SECRET);
    expect(JSON.parse(line)).toMatchObject({
      req: { headers: "[redacted]", authorization: "[redacted]" },
      registration: { token: "[redacted]" },
      config: { secret: "[redacted]", secrets: "[redacted]" },
      headers: "[redacted]",
    });
  });

  it("redacts the console's token headers by name, at the top level and one level down", () => {
    const { lines, logger } = capture();
    logger.info(
      {
        "x-admin-api-token": SECRET,
        "x-console-session": TOKEN,
        request: {
          "x-registration-admin-token": PASSWORD,
          "x-admin-api-token": SECRET,
          "x-console-session": TOKEN,
        },
      },
      "x",
    );
    expect(lines[0]).not.toContain(SECRET);
    expect(lines[0]).not.toContain(PASSWORD);
    expect(lines[0]).not.toContain(TOKEN);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      "x-admin-api-token": "[redacted]",
      "x-console-session": "[redacted]",
      request: {
        "x-registration-admin-token": "[redacted]",
        "x-admin-api-token": "[redacted]",
        "x-console-session": "[redacted]",
      },
    });
  });

  it("redacts the edge's secret header by name, at the top level and one level down", () => {
    const { lines, logger } = capture();
    logger.info({ "x-svc-edge-secret": SECRET, request: { "x-svc-edge-secret": SECRET } }, "x");
    expect(lines[0]).not.toContain(SECRET);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      "x-svc-edge-secret": "[redacted]",
      request: { "x-svc-edge-secret": "[redacted]" },
    });
  });

  it("keeps what is not secret", () => {
    const { lines, logger } = capture();
    logger.info({ request_id: "req_1", status: 401 }, "request");
    expect(JSON.parse(lines[0]!)).toMatchObject({ request_id: "req_1", status: 401, msg: "request" });
  });
});
