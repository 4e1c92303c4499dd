import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EmbeddedPostgresHandle, startEmbeddedPostgres } from "../../origin/db/embedded.ts";
import { freePort } from "../free-port.ts";
import { type AutovacuumWatch, autovacuumTable, watchAutovacuum } from "./autovacuum.ts";

describe("the tables autovacuum worked on during a bench's phase", () => {
  let folder = "";
  let cluster: EmbeddedPostgresHandle | undefined;
  let watch: AutovacuumWatch | undefined;
  let client: pg.Client | undefined;

  beforeAll(async () => {
    folder = await mkdtemp(path.join(tmpdir(), "autovacuum-"));
    await chmod(folder, 0o755);
    // The launcher looks for work every second, where it looks every minute by default.
    cluster = await startEmbeddedPostgres({
      dir: path.join(folder, "pg"),
      port: await freePort(),
      settings: { autovacuum_naptime: "1" },
    });
    watch = await watchAutovacuum(cluster.url, 20);
    client = new pg.Client({ connectionString: cluster.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await watch?.close();
    await cluster?.stop();
    await rm(folder, { recursive: true, force: true });
  });

  it("names a table autovacuum took up while the phase ran, and none it did not", async () => {
    // Autovacuum on only once the table holds enough dead rows to keep a worker busy a while.
    await client!.query(
      "create table churned (id int primary key, pad text not null) with (autovacuum_enabled = false)",
    );
    await client!.query("insert into churned select n, repeat('x', 200) from generate_series(1, 300000) n");
    await client!.query("delete from churned");
    const quiet = await watch!.during(async () => {
      await new Promise((resolve) => setTimeout(resolve, 200));
    });
    expect(quiet.tables).not.toContain("churned");

    const busy = await watch!.during(async () => {
      await client!.query(
        "alter table churned set (autovacuum_enabled = true, autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0)",
      );
      const deadline = Date.now() + 20_000;
      for (;;) {
        const { rows } = await client!.query<{ vacuums: string }>(
          "select autovacuum_count::text as vacuums from pg_stat_user_tables where relname = 'churned'",
        );
        if (Number(rows[0]?.vacuums) > 0 || Date.now() > deadline) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    });
    expect(busy.tables).toContain("churned");
  }, 40_000);

  it("reads the relation from each form of a worker's activity", () => {
    expect(autovacuumTable("autovacuum: VACUUM ANALYZE public.events")).toBe("events");
    expect(autovacuumTable("autovacuum: ANALYZE public.agent_actions")).toBe("agent_actions");
    expect(autovacuumTable("autovacuum: VACUUM pg_catalog.pg_attribute")).toBe("pg_catalog.pg_attribute");
    expect(autovacuumTable("autovacuum: VACUUM public.events (to prevent wraparound)")).toBe("events");
    expect(autovacuumTable("")).toBeUndefined();
  });
});
