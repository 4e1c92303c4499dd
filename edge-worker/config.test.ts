import { describe, expect, it } from "vitest";
import { parseEdgeConfig } from "./config.ts";

const SECRET = "k".repeat(32);
const LOCAL = { EDGE_LOCAL_DEV: "true" } as const;

describe("parseEdgeConfig", () => {
  it("defaults BASE_PATH to /77 and keeps a configured secret", () => {
    const parsed = parseEdgeConfig({
      ...LOCAL,
      ORIGIN_URL: "http://127.0.0.1:8788",
      EDGE_SHARED_SECRET: SECRET,
    });
    expect(parsed.ok && parsed.value.basePath).toBe("/77");
    expect(parsed.ok && parsed.value.originUrl.origin).toBe("http://127.0.0.1:8788");
    expect(parsed.ok && parsed.value.edgeSharedSecret).toBe(SECRET);
  });

  it("takes an https origin on a public host with a secret, as deployed", () => {
    const parsed = parseEdgeConfig({ ORIGIN_URL: "https://origin.example", EDGE_SHARED_SECRET: SECRET });
    expect(parsed.ok && parsed.value.originUrl.origin).toBe("https://origin.example");
  });

  it("in local development, treats a missing secret as not configured, so registration fails closed", () => {
    for (const EDGE_SHARED_SECRET of [undefined, ""]) {
      const parsed = parseEdgeConfig({ ...LOCAL, ORIGIN_URL: "http://127.0.0.1:8788", EDGE_SHARED_SECRET });
      expect(parsed.ok && parsed.value.edgeSharedSecret).toBeUndefined();
    }
  });

  it("refuses a secret under 32 bytes, locally and deployed, naming the variable and not its value", () => {
    for (const env of [
      { ...LOCAL, ORIGIN_URL: "http://127.0.0.1:8788" },
      { ORIGIN_URL: "https://origin.example" },
    ]) {
      const parsed = parseEdgeConfig({ ...env, EDGE_SHARED_SECRET: "short-secret-value" });
      expect(parsed.ok).toBe(false);
      const problems = parsed.ok ? "" : parsed.error.join("\n");
      expect(problems).toContain("EDGE_SHARED_SECRET is shorter than 32 bytes");
      expect(problems).not.toContain("short-secret-value");
    }
  });

  it("refuses a missing secret outside local development", () => {
    const parsed = parseEdgeConfig({ ORIGIN_URL: "https://origin.example" });
    expect(parsed.ok ? "" : parsed.error.join("\n")).toContain("EDGE_SHARED_SECRET is not set");
  });

  it.each([
    ["http://origin.example", "must be https://"],
    ["http://127.0.0.1:8788", "must be https://"],
    ["https://127.0.0.1:8788", "loopback"],
    ["https://127.3.2.1", "loopback"],
    ["https://localhost:8788", "loopback"],
    ["https://api.localhost", "loopback"],
    ["https://[::1]:8788", "loopback"],
    ["https://0.0.0.0", "loopback"],
  ])("refuses ORIGIN_URL %s outside local development (%s)", (ORIGIN_URL, why) => {
    const parsed = parseEdgeConfig({ ORIGIN_URL, EDGE_SHARED_SECRET: SECRET });
    expect(parsed.ok).toBe(false);
    const problems = parsed.ok ? "" : parsed.error.join("\n");
    expect(problems).toContain("ORIGIN_URL");
    expect(problems).toContain(why);
    expect(problems).not.toContain(ORIGIN_URL);
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
    const parsed = parseEdgeConfig({ ...LOCAL, ...env });
    expect(parsed.ok).toBe(false);
    const problems = parsed.ok ? "" : parsed.error.join("\n");
    expect(problems).toContain(variable);
    expect(problems).not.toContain("secret-value");
    expect(problems).not.toContain("origin.example");
  });
});
