import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { isFinal, type LoadDriver, type LoadRecord } from "../testing/load-driver.ts";
import { type LoadStack, startLoadStack } from "../testing/load-stack.ts";
import { type OwnPostgres, startOwnPostgres } from "../testing/own-postgres.ts";

// Postgres stopped and started again under load, on a cluster this file owns (the
// suite's shared cluster is never touched), with the origin as its own process (origin/main.ts).
// While it is down: clear 503s, never a 500 or a hang; after: the same origin recovers with no
// restart, and the rows and the chain show no action lost, doubled or stuck, no identity disabled.

describe("Postgres stopped and restarted under load (a test-owned cluster)", () => {
  let postgres: OwnPostgres;
  let load: LoadStack;

  beforeAll(async () => {
    postgres = await startOwnPostgres();
    load = await startLoadStack({ database: postgres.database });
  });
  afterAll(async () => {
    await load?.close(); // drops the database: stops the cluster and removes its folder
  });

  it("answers clear 503s while the database is down and recovers without a restart", async () => {
    const origin = await load.spawnOrigin();
    let driver: LoadDriver | undefined;
    try {
      driver = load.startLoad(origin.base);
      await sleep(1_500);
      const stoppedAt = Date.now();
      await postgres.stop();
      await sleep(3_000);
      await postgres.start();
      const restartedAt = Date.now();
      let flowing = 0;
      for (const deadline = Date.now() + 15_000; !flowing && Date.now() < deadline; ) {
        await sleep(100);
        flowing =
          driver.records.find(
            (record: LoadRecord) =>
              record.startedAt > restartedAt &&
              record.kind === "transfer" &&
              (record.status === 202 || record.status === 200),
          )?.endedAt ?? 0;
      }
      await sleep(1_500);
      await driver.stop();
      const tail = driver.records.filter((record) => record.startedAt > flowing + 200);
      const unanswered = await driver.settle();
      const audit = await load.audit(driver);
      const summary = driver.describe();
      process.stderr.write(`Postgres fault, load summary:\n${summary}\n`);

      expect(flowing, `no transfer went through after the restart:\n${summary}`).toBeGreaterThan(0);
      const unclear = driver.records.filter(
        (record) =>
          typeof record.status !== "number" ||
          (record.status >= 500 &&
            !["service_unavailable", "registration_unavailable"].includes(record.code ?? "")),
      );
      expect(unclear, summary).toEqual([]);
      const outage = driver.records.filter(
        (record) => record.startedAt > stoppedAt + 200 && record.endedAt < restartedAt,
      );
      expect(
        outage.some((record) => record.status === 503),
        summary,
      ).toBe(true);
      expect(tail.filter((record) => !isFinal(record.status))).toEqual([]);
      expect(unanswered).toEqual([]);
      expect(audit.problems, summary).toEqual([]);
    } finally {
      if (origin.child.exitCode !== null || origin.child.signalCode !== null)
        process.stderr.write(`the origin exited:\n${origin.output().slice(-6000)}\n`);
      await driver?.stop();
      await origin.stop();
    }
  }, 120_000);
});
