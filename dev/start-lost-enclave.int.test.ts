import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { connectDatabase } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { agentIdentities } from "../origin/db/schema.ts";
import { freePort } from "../testing/free-port.ts";
import { runLauncherToExit } from "../testing/launcher.ts";

// `rm -rf .data/enclave && npm start` used to initialise a fresh enclave beside the database, make
// and fund a new treasury (orphaning the old float), print "ready" and a token, while every wallet
// of the database had lost its key. The launcher now stops before it starts any other part.

describe("npm start beside a database whose enclave is gone", () => {
  let dataDir = "";
  afterAll(async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("refuses with the recovery instruction, exit 1, and initialises no enclave", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-lost-enclave-"));
    await chmod(dataDir, 0o755);
    const pgPort = await freePort();
    // A used local stack's database (one agent identity) with no enclave folder next to it.
    const pg = await startEmbeddedPostgres({ dir: path.join(dataDir, "pg"), port: pgPort });
    const database = connectDatabase({ url: pg.url, driver: "pg", maxConnections: 1 });
    try {
      await migrateDatabase(database.db);
      await database.db.insert(agentIdentities).values({
        assignedWallet: `0x${randomBytes(20).toString("hex")}`,
        agentTransferKeyRef: randomBytes(32).toString("hex"),
        capabilities: ["read"],
        origin: "operator",
      });
    } finally {
      await database.close();
      await pg.stop();
    }

    const { code, output } = await runLauncherToExit({
      START_DATA_DIR: dataDir,
      ORIGIN_PORT: String(await freePort()),
      DEVNET_PORT: String(await freePort()),
      EDGE_PORT: String(await freePort()),
      EMBEDDED_PG_PORT: String(pgPort),
      LOG_LEVEL: "warn",
    });
    expect(code).toBe(1);
    expect(output).toContain(
      `[start] failed: the database has 1 agent identities but ${path.join(dataDir, "enclave")} holds no enclave`,
    );
    expect(output).toContain('with the recovery runbook (docs/operations.md, "Disaster recovery")');
    expect(output).toContain("START_NEW_ENCLAVE=1 npm start");
    expect(output).not.toContain("ready in");
    expect(output).not.toContain("[start] token");
    // Nothing was made in the enclave's place: no enclave, no new authority keys, no treasury.
    expect((await readdir(dataDir)).sort()).toEqual(["pg", "pg.password"]);
  }, 120_000);
});
