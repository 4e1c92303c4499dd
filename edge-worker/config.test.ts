import { describe, expect, it } from "vitest";
import { parseEdgeConfig } from "./config.ts";

const SECRET = "k".repeat(32);

describe("parseEdgeConfig", () => {
  it("defaults BASE_PATH to /77 and keeps a configured secret", () => {
    const parsed = parseEdgeConfig({ ORIGIN_URL: "http://127.0.0.1:8788", EDGE_SHARED_SECRET: SECRET });
    expect(parsed.ok && parsed.config.basePath).toBe("/77");
    expect(parsed.ok && parsed.config.originUrl.origin).toBe("http://127.0.0.1:8788");
    expect(parsed.ok && parsed.config.edgeSharedSecret).toBe(SECRET);
  });

  it("treats a missing or short secret as not configured, so registration fails closed", () => {
    for (const EDGE_SHARED_SECRET of [undefined, "", "k".repeat(31)]) {
      const parsed = parseEdgeConfig({ ORIGIN_URL: "https://origin.example", EDGE_SHARED_SECRET });
      expect(parsed.ok && parsed.config.edgeSharedSecret).toBeUndefined();
    }
  });

  it.each([
    [{ BASE_PATH: "77", ORIGIN_URL: "http://127.0.0.1:8788" }, "BASE_PATH"],
    [{ BASE_PATH: "/77/", ORIGIN_URL: "http://127.0.0.1:8788" }, "BASE_PATH"],
    [{}, "ORIGIN_URL"],
    [{ ORIGIN_URL: "not a url" }, "ORIGIN_URL"],
    [{ ORIGIN_URL: "ftp://origin.example" }, "ORIGIN_URL"],
    [{ ORIGIN_URL: "https://origin.example/77" }, "ORIGIN_URL"],
    [{ ORIGIN_URL: "https://user:secret-value@origin.example" }, "ORIGIN_URL"],
  ])("refuses %j, naming %s without echoing its value", (env, variable) => {
    const parsed = parseEdgeConfig(env);
    expect(parsed.ok).toBe(false);
    const problems = parsed.ok ? "" : parsed.problems.join("\n");
    expect(problems).toContain(variable);
    expect(problems).not.toContain("secret-value");
    expect(problems).not.toContain("origin.example");
  });
});
