import { spawn } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LOG_QUEUE_MAX_BYTES } from "../shared/node/unread-output.ts";
import { sleep } from "../shared/sleep.ts";
import { launcherEnv } from "../testing/launcher.ts";

// `npm start | less` with the pager left on its first screen, or a terminal multiplexer's pane that
// stopped reading: the launcher passes on every line its parts write (the origin's, one a
// request), and Node queued each one its reader did not take, in the launcher's memory, for as
// long as the reader stalled. It now drops what comes past LOG_QUEUE_MAX_BYTES waiting there, and
// says how many once it has room again.

describe("npm start with a reader that stalls (real stack)", () => {
  let dataDir = "";
  afterAll(async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("holds at most a bounded backlog of its parts' lines for it (the rest dropped and counted), and stops on Ctrl-C", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-stalled-start-"));
    await chmod(dataDir, 0o755);
    const launcher = spawn(process.execPath, ["dev/start.mjs"], {
      env: { ...process.env, ...(await launcherEnv(dataDir)), LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => launcher.once("exit", (code) => resolve(code)));
    let received = "";
    launcher.stdout.on("data", (chunk: Buffer) => {
      received += chunk.toString();
    });
    launcher.stderr.on("data", (chunk: Buffer) => {
      received += chunk.toString();
    });
    try {
      const deadline = Date.now() + 180_000;
      while (!/\[start\] origin +http/.test(received)) {
        if (launcher.exitCode !== null) throw new Error(`npm start exited:\n${received}`);
        if (Date.now() > deadline) throw new Error(`npm start not ready:\n${received}`);
        await sleep(100);
      }
      const origin = /\[start\] origin +(http:\/\/\S+)/.exec(received)?.[1];
      const before = received.length;
      // From here the launcher's reader takes nothing.
      launcher.stdout.pause();
      // About 160 bytes of the origin's log a request, passed on by the launcher: 20,000 write
      // 3 MB while its reader stalls, far past the bound and what the pipe takes.
      const requests = 20_000;
      let next = 0;
      const client = async (): Promise<void> => {
        while (next < requests) {
          next++;
          const missing = await fetch(`${origin}/no-such-route`);
          expect(missing.status).toBe(404);
          await missing.body?.cancel();
        }
      };
      await Promise.all(Array.from({ length: 8 }, client));
      launcher.stdout.resume();
      // One more request once it reads again: its line comes after the count of those dropped.
      const last = await fetch(`${origin}/healthz`);
      expect(last.status).toBe(200);
      // The origin logs each request before it answers it, so its line of that last request comes
      // after every 404's; and a count of lines dropped comes before the next line passed on. Once
      // that line is here, each 404's line was passed on or counted. (Waiting for the count alone,
      // a CI-loaded run read before the last five 404 lines had come: 19,995 of 20,000.)
      const ended = (): boolean => {
        const lines = received.slice(before).split("\n");
        return (
          lines.some((line) => line.startsWith("[start] dropped")) &&
          lines.some((line) => line.includes('"msg":"request"') && line.includes('"status":200'))
        );
      };
      const lineDeadline = Date.now() + 30_000;
      while (!ended() && Date.now() < lineDeadline) await sleep(100);
      const since = received.slice(before).split("\n");
      const requestLines = since.filter((line) => line.includes('"route":') && line.includes('"status":404'));
      const backlogBytes = requestLines.reduce((sum, line) => sum + line.length + 1, 0);
      expect(backlogBytes).toBeLessThan(LOG_QUEUE_MAX_BYTES + 512 * 1024);
      const dropped = since
        .map((line) => /^\[start\] dropped (\d+) lines/.exec(line)?.[1])
        .reduce((sum, count) => sum + Number(count ?? 0), 0);
      expect(requestLines.length + dropped).toBeGreaterThanOrEqual(requests);
    } finally {
      launcher.kill("SIGINT");
      expect(await exited).toBe(0);
    }
  }, 400_000);
});
