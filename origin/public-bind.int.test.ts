import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { createTestDatabase } from "../testing/database.ts";
import { REPO_ROOT } from "../testing/enclave-process.ts";
import { holdSocket } from "../testing/held-socket.ts";
import { spawnOrigin } from "../testing/origin-process.ts";

const run = promisify(execFile);

// The origin refuses to listen beyond loopback unless AGENT_TRUSTED_PROXIES is
// set or the operator acknowledges it with AGENT_ALLOW_PUBLIC_BIND=1: a clear message, exit 1.
describe("the origin bound to a non-loopback address", () => {
  it("stops at start with a message naming both ways out, and a non-zero exit", async () => {
    const { DATABASE_URL: _unused, ...env } = process.env;
    const outcome = await run(process.execPath, programArgs("origin/main.ts"), {
      cwd: REPO_ROOT,
      env: { ...env, ORIGIN_HOST: "0.0.0.0", ORIGIN_PORT: "0", AGENT_GATEWAY_ENABLED: "true" },
      timeout: 60_000,
    }).then(
      () => ({ code: 0, stderr: "" }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    );
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toContain(
      "ORIGIN_HOST: 0.0.0.0 is not a loopback address; set AGENT_TRUSTED_PROXIES to the CIDRs of the " +
        "proxies in front of the origin, or AGENT_ALLOW_PUBLIC_BIND=1 to accept that clients reach it directly",
    );
  });

  it("starts when the operator acknowledges it (AGENT_ALLOW_PUBLIC_BIND=1)", async () => {
    const db = await createTestDatabase();
    try {
      const origin = await spawnOrigin({
        env: { DATABASE_URL: db.url, ORIGIN_HOST: "0.0.0.0", AGENT_ALLOW_PUBLIC_BIND: "1" },
      });
      try {
        expect((await fetch(`${origin.base.replace("0.0.0.0", "127.0.0.1")}/healthz`)).status).toBe(200);
      } finally {
        expect(await origin.stop()).toBe(0);
      }
    } finally {
      await db.drop();
    }
  });

  // Socket activation (origin/socket-activation.ts): the supervisor binds the socket, so the
  // checks above would judge ORIGIN_HOST while the origin served another address.
  it("refuses a socket handed over bound elsewhere than ORIGIN_HOST:ORIGIN_PORT", async () => {
    const db = await createTestDatabase();
    const socket = holdSocket("127.0.0.2");
    try {
      const started = spawnOrigin({ env: { DATABASE_URL: db.url, ORIGIN_HOST: "127.0.0.1" }, socket });
      await expect(started).rejects.toThrow(
        `origin: LISTEN_FDS: the inherited socket is bound to 127.0.0.2:${socket.port}, ` +
          `not ORIGIN_HOST:ORIGIN_PORT 127.0.0.1:${socket.port}`,
      );
    } finally {
      socket.close();
      await db.drop();
    }
  });
});
