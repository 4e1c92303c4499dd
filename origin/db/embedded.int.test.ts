import { chmod, mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../testing/free-port.ts";
import { startEmbeddedPostgres } from "./embedded.ts";

// Under root the cluster runs as the `postgres` user. A data folder made private (a umask of 077,
// or a tool that made `.data/backups` first with its parents 0700) kept that user out, and
// `npm start` failed with initdb's "Permission denied".
describe.runIf(userInfo().uid === 0)("the embedded Postgres under root", () => {
  let folder = "";
  afterAll(async () => {
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it("starts in a data folder that is 0700, which it lets others enter but not list", async () => {
    folder = await mkdtemp(path.join(tmpdir(), "agents-embedded-"));
    await chmod(folder, 0o755);
    const dataDir = path.join(folder, "data");
    await mkdir(dataDir, { mode: 0o700 });
    expect((await stat(dataDir)).mode & 0o777).toBe(0o700);

    const cluster = await startEmbeddedPostgres({ dir: path.join(dataDir, "pg"), port: await freePort() });
    try {
      const client = new pg.Client({ connectionString: cluster.url });
      await client.connect();
      const { rows } = await client.query<{ answer: number }>("select 41 + 1 as answer");
      await client.end();
      expect(rows[0]?.answer).toBe(42);
    } finally {
      await cluster.stop();
    }
    expect((await stat(dataDir)).mode & 0o777).toBe(0o701);
    expect((await stat(`${path.join(dataDir, "pg")}.password`)).mode & 0o777).toBe(0o600);
  });
});
