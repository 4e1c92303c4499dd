import { randomBytes } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { sql } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../../shared/constants.ts";
import { launchBrowser } from "../../testing/browser.ts";
import { recordPageProblems, signInToConsole } from "../../testing/console-browser.ts";
import { chartBuckets, seedChartRows } from "../../testing/console-charts-seed.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { queryRows } from "../db/client.ts";

// The console's charts in a real headless Chromium against the real origin (real Postgres), on a
// fixed clock: each chart is drawn with a title and axis labels, and the values it shows (its
// hidden table, one cell per bucket and series) are those the database holds, read here with
// queries of the test's own; nothing is refused by the page's strict CSP; on a phone the charts fit
// the screen.

const EDGE_SECRET = randomBytes(32).toString("hex");
const secrets = consoleSecrets();
const NOW = new Date("2031-05-06T10:30:20.000Z");
const SCREENSHOT = path.resolve(".test-artifacts/console-charts.png");
const MINUTE = 60_000;
const HOUR = 3_600_000;
const iso = (ms: number | Date): string => new Date(ms).toISOString();
const AXE = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

type Cell = { chart: string; bucket: string; series: string; value: string };

describe("the console's charts in a browser", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let browser: Browser;
  let context: BrowserContext;
  const { minute, hour } = chartBuckets(NOW);
  const rows = <T>(query: ReturnType<typeof sql>): Promise<T[]> => queryRows<T>(testDb.handle.db, query);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 13);
    await seedChartRows(testDb.handle.db, NOW);
    origin = await startTestOrigin({
      database: testDb.handle,
      clock: { now: () => new Date(NOW) },
      env: {
        ...secrets.env,
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
      },
    });
    // Three registrations refused while the policy is paused (its initial state).
    for (let i = 0; i < 3; i++) {
      const refused = await send(`${origin.base}/agent/v1/register`, {
        method: "POST",
        headers: {
          [HEADER_REGISTRATION]: "1",
          [HEADER_EDGE_SECRET]: EDGE_SECRET,
          [HEADER_REGISTRATION_IP]: "81.4.0.10",
        },
        body: "{}",
      });
      expect(refused.status).toBe(503);
    }
    browser = await launchBrowser();
    // One context for every page, with one blank page kept open (console-page.int.test.ts says why).
    context = await browser.newContext();
    await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await origin?.close();
    await testDb?.drop();
  });

  /** Opens the console; collects script errors, console errors and CSP violations. */
  const open = async (page: Page): Promise<string[]> => {
    const problems = recordPageProblems(page);
    // Installed by the DevTools protocol, outside the page's CSP: the violations the page reports.
    await page.addInitScript(`document.addEventListener("securitypolicyviolation", (event) =>
      console.error("CSP violation: " + event.violatedDirective + " " + event.blockedURI));`);
    await signInToConsole(page, `${origin.base}/admin/agents`, { admin: secrets.adminToken });
    await page.locator('#overview-charts figure[data-chart="balances"]').waitFor();
    return problems;
  };

  const cells = (page: Page): Promise<Cell[]> =>
    page.evaluate(`[...document.querySelectorAll("#overview-charts figure[data-chart] td[data-value]")].map((td) => ({
      chart: td.closest("figure").dataset.chart,
      bucket: td.dataset.bucket,
      series: td.dataset.series,
      value: td.dataset.value,
    }))`) as Promise<Cell[]>;

  /** The non-zero values of one chart, as `bucket|series` → value. */
  const valuesOf = (all: Cell[], chart: string): Record<string, string> =>
    Object.fromEntries(
      all
        .filter((cell) => cell.chart === chart && cell.value !== "0" && cell.value !== "")
        .map((cell) => [`${cell.bucket}|${cell.series}`, cell.value]),
    );

  it("draws each chart with a title and axis labels, and shows the database's figures", async () => {
    const page = await context.newPage();
    const problems = await open(page);
    const all = await cells(page);

    // Every chart: a caption, an SVG image named by its <title>, axis labels.
    const figures =
      (await page.evaluate(`[...document.querySelectorAll("#overview-charts figure[data-chart]")].map((f) => ({
      name: f.dataset.chart,
      caption: f.querySelector("figcaption").textContent,
      role: f.querySelector("svg").getAttribute("role"),
      title: f.querySelector("svg > title").textContent,
      axisLabels: f.querySelectorAll("svg .axis-label").length,
    }))`)) as { name: string; caption: string; role: string; title: string; axisLabels: number }[];
    expect(figures.map((f) => f.name)).toEqual([
      "registrations",
      "actions",
      "confirmation",
      "key-stock",
      "findings",
      "balances",
    ]);
    for (const each of figures) {
      expect(each.role, each.name).toBe("img");
      expect(each.title, each.name).toBe(each.caption);
      expect(each.axisLabels, each.name).toBe(2);
    }

    // Registrations per hour: issued from registration_issued, refusals as the route counted them.
    const issued = await rows<{ start: Date; n: number }>(
      sql`select date_trunc('hour', issued_at, 'UTC') as start, count(*)::int as n from registration_issued
          where issued_at >= ${iso(hour - 23 * HOUR)} group by 1`,
    );
    expect(valuesOf(all, "registrations")).toEqual({
      ...Object.fromEntries(issued.map((row) => [`${iso(row.start)}|issued`, String(row.n)])),
      [`${iso(hour)}|refused:paused`]: "3",
    });

    // Actions per minute, by kind and state, from agent_actions.
    const actions = await rows<{ start: Date; kind: string; status: string; n: number }>(
      sql`select date_trunc('minute', created_at, 'UTC') as start, kind, status, count(*)::int as n
          from agent_actions where created_at >= ${iso(minute - 59 * MINUTE)} group by 1, 2, 3`,
    );
    expect(actions.length).toBeGreaterThan(0);
    expect(valuesOf(all, "actions")).toEqual(
      Object.fromEntries(
        actions.map((row) => [`${iso(row.start)}|${row.kind}/${row.status}`, String(row.n)]),
      ),
    );

    // Time to confirmation: the nearest-rank p50 and p99 of the durations the rows hold.
    const durations = async (table: "agent_actions" | "x402_settlements"): Promise<number[]> =>
      (
        await rows<{ ms: number }>(
          table === "agent_actions"
            ? sql`select round(extract(epoch from updated_at - created_at) * 1000)::int as ms from agent_actions
                  where kind = 'transfer' and status = 'confirmed' and updated_at >= ${iso(minute - 59 * MINUTE)}`
            : sql`select round(extract(epoch from updated_at - created_at) * 1000)::int as ms from x402_settlements
                  where status = 'settled' and updated_at >= ${iso(minute - 59 * MINUTE)}`,
        )
      )
        .map((row) => row.ms)
        .sort((a, b) => a - b);
    const rank = (sorted: number[], p: number): string => String(sorted[Math.ceil(p * sorted.length) - 1]);
    const transfers = await durations("agent_actions");
    const settlements = await durations("x402_settlements");
    expect(valuesOf(all, "confirmation")).toEqual({
      "|transfers:p50": rank(transfers, 0.5),
      "|transfers:p99": rank(transfers, 0.99),
      "|settlements:p50": rank(settlements, 0.5),
      "|settlements:p99": rank(settlements, 0.99),
    });

    // Free keys against the reserve.
    const [stock] = await rows<{ free: number; reserve: number }>(
      sql`select (select count(*)::int from key_pool where status = 'free') as free,
                 (select key_reserve from registration_policy) as reserve`,
    );
    expect(valuesOf(all, "key-stock")).toEqual({
      "|free": String(stock!.free),
      "|reserve": String(stock!.reserve),
    });

    // Findings of the last day, by class.
    const findings = await rows<{ class: string; n: number }>(
      sql`select class, count(*)::int as n from identity_findings where at >= ${iso(hour - 23 * HOUR)} group by class`,
    );
    expect(valuesOf(all, "findings")).toEqual(
      Object.fromEntries(findings.map((row) => [`|${row.class}`, String(row.n)])),
    );

    // No treasury or settler on this node: their floors, and the balance said to be unknown.
    expect(valuesOf(all, "balances")).toEqual({
      "|treasury:floor_units": "10000000",
      "|settler:floor_units": "1000000",
    });
    expect(await page.textContent('#overview-charts figure[data-chart="balances"] svg')).toContain(
      "treasury: unknown (not_configured); floor 10",
    );

    // axe-core on the charts, evaluated through the DevTools protocol (an injected <script> would be
    // refused by the page's CSP): no serious or critical violation.
    await page.evaluate(await readFile(AXE, "utf8"));
    const violations = (await page.evaluate(`axe.run("#overview-charts").then((result) => result.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")))`)) as string[];
    expect(violations).toEqual([]);

    await mkdir(path.dirname(SCREENSHOT), { recursive: true });
    await page.locator("#overview-charts").screenshot({ path: SCREENSHOT });
    expect(problems).toEqual([]);
    await page.close();
  });

  it("on a phone the charts fit the screen and the page never scrolls sideways", async () => {
    const page = await context.newPage();
    await page.setViewportSize({ width: 390, height: 844 });
    const problems = await open(page);
    const widths = (await page.evaluate(`(() => ({
      page: document.documentElement.scrollWidth,
      viewport: window.innerWidth,
      charts: [...document.querySelectorAll("#overview-charts figure[data-chart] svg.chart-svg")].map((svg) => svg.getBoundingClientRect().right),
    }))()`)) as { page: number; viewport: number; charts: number[] };
    expect(widths.page).toBeLessThanOrEqual(widths.viewport);
    expect(widths.charts).toHaveLength(6);
    for (const right of widths.charts) expect(right).toBeLessThanOrEqual(widths.viewport);
    expect(problems).toEqual([]);
    await page.close();
  });
});
