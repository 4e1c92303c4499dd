import { describe, expect, it } from "vitest";
import { AppError } from "./errors.ts";

const frames = (error: Error): string[] =>
  (error.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line));

describe("AppError", () => {
  it("captures no stack for an answer to the client (4xx), and a full one for a fault (5xx)", () => {
    const refused = new AppError("rate_limited", "too many requests", { fields: { retry_after: 3 } });
    expect(refused.status).toBe(429);
    expect(frames(refused)).toEqual([]);
    expect(refused.message).toBe("too many requests");

    const fault = new AppError("service_unavailable", "authentication is temporarily unavailable");
    expect(fault.status).toBe(503);
    expect(frames(fault).length).toBeGreaterThan(0);
  });

  it("leaves the process's stack trace limit as it found it, so other errors keep their stacks", () => {
    const limit = Error.stackTraceLimit;
    new AppError("agent_auth_failed", "authentication failed");
    expect(Error.stackTraceLimit).toBe(limit);
    expect(frames(new Error("a bug")).length).toBeGreaterThan(0);
  });
});
