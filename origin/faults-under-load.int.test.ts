import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { holdSocket } from "../testing/held-socket.ts";
import { send } from "../testing/http.ts";
import { isFinal, type LoadDriver, type LoadRecord } from "../testing/load-driver.ts";
import { type LoadStack, startLoadStack } from "../testing/load-stack.ts";
import { useFixture } from "../testing/stack.ts";
import { startTcpProxy } from "../testing/tcp-proxy.ts";
import { queryRows } from "./db/client.ts";

// Faults against the real processes (origin/main.ts, the enclave, the devnet),
// each with load running through it: reads, rpc, transfers, faucet payouts and registrations.
// Every case: clear errors while it lasts (a status and the spec's code, never a bare 5xx, never a
// hang), recovery without an operator, and then, from the rows and the chain: no action lost,
// doubled or stuck, balances equal to what the settled actions moved, no identity disabled.

/** Answers that are not clear: a hang, a cut, a 500, or a 5xx whose code is not one of `allowed`. */
function unclear(records: LoadRecord[], allowed: string[]): LoadRecord[] {
  return records.filter(
    (record) =>
      record.status === "timeout" ||
      record.status === "cut" ||
      (typeof record.status === "number" &&
        record.status >= 500 &&
        (record.status === 500 || !allowed.includes(record.code ?? ""))),
  );
}

/** Actions answered but not ended yet: in flight across the fault. */
async function inFlight(load: LoadStack): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    load.stack.db.handle.db,
    sql`select count(*)::int as n from agent_actions where status in ('signed', 'submitted')`,
  );
  return row!.n;
}

/** Waits until a money request started after `since` went through (recovery, no operator). */
async function untilMoneyFlows(driver: LoadDriver, since: number, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const done = driver.records.find(
      (record) =>
        record.startedAt > since &&
        (record.kind === "transfer" || record.kind === "faucet") &&
        (record.status === 202 || record.status === 200),
    );
    if (done) return done.endedAt;
    if (Date.now() > deadline)
      throw new Error(`no money request went through after the fault:\n${driver.describe()}`);
    await sleep(100);
  }
}

/**
 * Adjacent concurrent blocks run at once, each on a load stack of its own (its devnet, enclave,
 * database, agents and load): the chain's fault is cut behind the origin its test spawns, beside
 * the enclave's kill and the origin's SIGTERM, which go in turn on the other stack (the enclave
 * is that stack's, and every origin on it signs through it).
 */
const BESIDE = { concurrent: true } as const;

/** A load stack (testing/load-stack.ts) for the describe block it is called in. */
function useLoadStack(): LoadStack {
  return useFixture(
    "load stack",
    () => startLoadStack(),
    (stack) => stack.close(),
  );
}

describe("faults under load (real processes)", () => {
  describe("the enclave killed, the origin SIGTERMed (one load stack)", BESIDE, () => {
    const load = useLoadStack();

    it.sequential("enclave SIGKILLed mid-request and restarted: 503 agent_signer_unavailable meanwhile, then everything settles", async () => {
      const origin = await load.spawnOrigin();
      let driver: LoadDriver | undefined;
      try {
        driver = load.startLoad(origin.base);
        await sleep(1_500);
        const killedAt = Date.now();
        await load.stack.enclave.kill();
        await sleep(2_000);
        await load.stack.enclave.start(); // the same data folder: keys, policy and counters survive
        const restartedAt = Date.now();
        const flowing = await untilMoneyFlows(driver, restartedAt);
        await sleep(1_500);
        await driver.stop();
        const tail = driver.records.filter((record) => record.startedAt > flowing + 200);
        const unanswered = await driver.settle();
        const audit = await load.audit(driver);
        const summary = driver.describe();
        process.stderr.write(`enclave fault, load summary:\n${summary}\n`);

        expect(unclear(driver.records, ["agent_signer_unavailable"]), summary).toEqual([]);
        const outage = driver.records.filter(
          (record) => record.startedAt > killedAt && record.endedAt < restartedAt,
        );
        expect(
          outage.some((record) => record.status === 503 && record.code === "agent_signer_unavailable"),
          summary,
        ).toBe(true);
        // Reads never needed the enclave: they went on answering through the outage.
        expect(
          outage.filter(
            (record) => ["balance", "network", "rpc"].includes(record.kind) && record.status !== 200,
          ),
        ).toEqual([]);
        expect(tail.filter((record) => !isFinal(record.status))).toEqual([]);
        expect(unanswered).toEqual([]);
        expect(audit.problems, summary).toEqual([]);
        // The sweep ran into the outage (a finding it retries), and disabled no one for it.
        const [findings] = await queryRows<{ retryable: number }>(
          load.stack.db.handle.db,
          sql`select count(*)::int as retryable from identity_findings where class = 'retryable'`,
        );
        expect(findings!.retryable).toBeGreaterThan(0);
      } finally {
        await driver?.stop();
        await origin.stop();
      }
    }, 120_000);

    it.sequential("origin SIGTERMed under load on a supervisor's socket: in-flight requests are answered, it exits 0, a restarted origin on the same socket answers the rest", async () => {
      // As systemd holds a socket-activated service's socket (origin/socket-activation.ts): it
      // outlives the origin, so connections made while no origin runs wait in its queue.
      const socket = holdSocket();
      let origin = await load.spawnOrigin({}, socket);
      let driver: LoadDriver | undefined;
      try {
        driver = load.startLoad(origin.base);
        await sleep(1_500);
        // SIGTERM while requests are in flight, not in a gap between them: that is what drains. A
        // money request spends the longest inside the origin (claim, batch, signature), so one is
        // among them; the snapshot follows these very requests, not a window of timestamps, which a
        // request answered within the same millisecond would fall out of.
        const isMoney = (kind: string) => kind === "transfer" || kind === "faucet";
        const moneyBy = Date.now() + 10_000;
        while (!driver.pending().some((request) => isMoney(request.kind))) {
          if (Date.now() > moneyBy) throw new Error(`no money request was sent:\n${driver.describe()}`);
          await sleep(1);
        }
        const atTerm = new Set(driver.pending().map((request) => request.serial));
        const termAt = Date.now();
        // Its drain lasts at most 10 s (origin/server.ts); far past that it is hung, not draining.
        const exitCode = await Promise.race([origin.stop(), sleep(40_000).then(() => "still running")]);
        const exitedAt = Date.now();
        const stranded = await inFlight(load);
        origin = await load.spawnOrigin({}, socket);
        const restartedAt = Date.now();
        const flowing = await untilMoneyFlows(driver, restartedAt);
        await sleep(1_500);
        await driver.stop();
        const tail = driver.records.filter((record) => record.startedAt > flowing + 200);
        const unanswered = await driver.settle();
        const audit = await load.audit(driver);
        const summary = driver.describe();
        // Made before the new origin was up and answered after the old one had gone: they waited in
        // the socket's queue.
        const waited = driver.records.filter(
          (record) => record.startedAt < restartedAt && record.endedAt > exitedAt,
        );
        process.stderr.write(
          `SIGTERM (exit ${exitCode} after ${exitedAt - termAt} ms, ${atTerm.size} requests in flight, ` +
            `${stranded} actions in flight, ` +
            `${waited.length} requests waited for the new origin), load summary:\n${summary}\n`,
        );

        expect(exitCode).toBe(0);
        // Drained: every request the old origin had taken was answered, and every connection made
        // since waited in the socket's queue for the new one: none refused, cut or left hanging.
        expect(
          driver.records.filter((record) => typeof record.status !== "number"),
          summary,
        ).toEqual([]);
        expect(unclear(driver.records, []), summary).toEqual([]);
        const during = driver.records.filter((record) => atTerm.has(record.serial));
        expect(
          during.map((record) => typeof record.status),
          "requests in flight at SIGTERM, each answered",
        ).toEqual([...atTerm].map(() => "number"));
        expect(waited.length, "requests that waited for the new origin").toBeGreaterThan(0);
        expect(tail.filter((record) => !isFinal(record.status))).toEqual([]);
        expect(unanswered).toEqual([]);
        expect(audit.problems, summary).toEqual([]);
      } finally {
        await driver?.stop();
        await origin.stop();
        socket.close();
      }
    }, 120_000);
  });

  describe("the chain cut (a load stack of its own)", BESIDE, () => {
    const load = useLoadStack();

    it("chain unreachable and back: clear 503s meanwhile, every action taken before or during it resolves after", async () => {
      const proxy = await startTcpProxy(load.stack.devnet.url);
      const origin = await load.spawnOrigin({ CHAIN_RPC_URL: proxy.url });
      let driver: LoadDriver | undefined;
      try {
        driver = load.startLoad(origin.base);
        await sleep(1_500);
        const cutAt = Date.now();
        // A partition, not a refusal: the origin learns only from its own timeouts (1 s here).
        proxy.cut("blackhole");
        await sleep(1_000);
        // One read of our own inside the outage, so the assertion does not hang on whether the mixed
        // load happened to fit a balance request into the window.
        const probe = await send(`${origin.base}/agent/v1/balance`, {
          headers: { authorization: `Bearer ${load.agents[0]!.token}` },
        });
        await sleep(Math.max(0, cutAt + 3_000 - Date.now()));
        const stranded = await inFlight(load);
        proxy.restore();
        const restoredAt = Date.now();
        const flowing = await untilMoneyFlows(driver, restoredAt);
        await sleep(1_500);
        await driver.stop();
        const tail = driver.records.filter((record) => record.startedAt > flowing + 200);
        const unanswered = await driver.settle();
        const audit = await load.audit(driver);
        const summary = driver.describe();
        process.stderr.write(
          `chain fault (${stranded} actions in flight at the cut's end), load summary:\n${summary}\n`,
        );

        expect(unclear(driver.records, ["chain_unavailable"]), summary).toEqual([]);
        const outage = driver.records.filter(
          (record) => record.startedAt > cutAt + 100 && record.endedAt < restoredAt,
        );
        expect([probe.status, (probe.body as { error?: { code?: string } }).error?.code]).toEqual([
          503,
          "chain_unavailable",
        ]);
        const balances = outage.filter((record) => record.kind === "balance");
        for (const record of balances)
          expect([record.status, record.code]).toEqual([503, "chain_unavailable"]);
        // /rpc speaks JSON-RPC (docs/api.md#conventions): the chain's absence is a JSON-RPC error,
        // answered at once.
        for (const record of outage.filter((r) => r.kind === "rpc"))
          expect([record.status, record.code]).toEqual([200, "rpc:-32000"]);
        expect(tail.filter((record) => !isFinal(record.status))).toEqual([]);
        expect(unanswered).toEqual([]);
        expect(audit.problems, summary).toEqual([]);
      } finally {
        await driver?.stop();
        await origin.stop();
        await proxy.close();
      }
    }, 120_000);
  });
});
