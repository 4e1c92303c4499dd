import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { buildStaleProgramsSaying } from "../ops/lib/program-bundles.mjs";
import { connectDatabase } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { freePort } from "./free-port.ts";
import { recordSecret, SINK_ENV, scanSink } from "./secret-sink.ts";

declare module "vitest" {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
  }
}

/**
 * Once per test run: a real Postgres (embedded on a free port, or the server of DATABASE_URL),
 * and a template database with every migration applied. Each test file clones the template
 * (testing/database.ts), so files run in parallel without sharing rows.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The agent CLI's bin runs its bundle while it is current with the sources (cli/build.mjs):
  // built here, so the CLI's tests run what an installed checkout runs, made from these sources.
  execFileSync(process.execPath, [fileURLToPath(new URL("../cli/build.mjs", import.meta.url))], {
    stdio: "inherit",
  });
  // Every program a test starts runs from its bundle while it is current with these sources
  // (ops/lib/program-bundles.mjs), as `npm start` runs its parts: those that are not are built here.
  await buildStaleProgramsSaying((line) => process.stdout.write(`${line}\n`));
  let adminUrl = process.env.DATABASE_URL;
  let stopEmbedded: (() => Promise<void>) | undefined;
  let tempDir: string | undefined;
  if (!adminUrl) {
    tempDir = await mkdtemp(path.join(tmpdir(), "agents-test-pg-"));
    // Under root the cluster runs as the `postgres` user, which must be able to enter the folder.
    await chmod(tempDir, 0o755);
    const embedded = await startEmbeddedPostgres({ dir: path.join(tempDir, "pg"), port: await freePort() });
    adminUrl = embedded.adminUrl;
    stopEmbedded = embedded.stop;
  }
  const template = `agents_template_${process.pid}`;
  await adminQuery(adminUrl, `drop database if exists "${template}"`);
  await adminQuery(adminUrl, `create database "${template}"`);
  const templateUrl = withDatabase(adminUrl, template);
  const handle = connectDatabase({ url: templateUrl, driver: "pg", maxConnections: 1 });
  await migrateDatabase(handle.db);
  await handle.close();

  // Secrets and tokens never reach logs (docs/security.md): every log line and error body of the run lands
  // here (secret-sink.ts), and the run fails at the end if a secret or a token is found in any of it.
  const sinkDir = await mkdtemp(path.join(tmpdir(), "agents-test-sink-"));
  process.env[SINK_ENV] = sinkDir;
  // The cluster's password is in every DATABASE_URL the tests hand an origin or a tool: an error
  // that printed the URL would print it.
  const password = decodeURIComponent(new URL(adminUrl).password);
  if (password) recordSecret(password);

  // `npm start` keeps its state in the checkout's `.data`; a test's process must keep its own in
  // its folders. One that fell back on the defaults wrote key backups there, and under root a
  // `.data/backups` made first left `.data` private to the Postgres that `npm start` runs.
  const checkoutData = path.join(project.config.root, ".data");
  const dataBefore = existsSync(checkoutData);

  project.provide("pgAdminUrl", adminUrl);
  project.provide("pgTemplate", template);

  return async () => {
    const leaks = scanSink(sinkDir);
    await rm(sinkDir, { recursive: true, force: true });
    // Stopped before either finding fails the run: a run that found a leak left its cluster running.
    await adminQuery(adminUrl, `drop database if exists "${template}" with (force)`).catch(() => {});
    await closeAdminClients();
    await stopEmbedded?.();
    if (tempDir) await rm(tempDir, { recursive: true, force: true });
    if (leaks.length > 0) {
      throw new Error(
        `secret scan: ${leaks.length} secret(s) or token(s) in the run's logs or error bodies:\n` +
          leaks
            .slice(0, 20)
            .map((leak) => `  - ${leak.source}: ${leak.what}`)
            .join("\n"),
      );
    }
    if (!dataBefore && existsSync(checkoutData)) {
      throw new Error(
        `the run wrote the checkout's .data (${readdirSync(checkoutData).join(", ")}), where npm start ` +
          "keeps its state: a test's process used a default path (BACKUP_DIR, START_DATA_DIR…) instead of its own folder",
      );
    }
  };
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/**
 * Runs one statement on the cluster's maintenance database (creating and dropping databases), over
 * one connection per process and URL kept open: a new connection costs the cluster about 20 ms of
 * CPU, and a run makes a few hundred databases. A connection that failed is dropped, and the next
 * statement opens another.
 */
export async function adminQuery(url: string, text: string): Promise<void> {
  await (await adminClient(url)).query(text);
}

type AdminClient = { query(text: string): Promise<void>; usable: boolean; end(): Promise<void> };
const adminClients = new Map<string, Promise<AdminClient>>();

async function adminClient(url: string): Promise<AdminClient> {
  const cached = adminClients.get(url);
  if (!cached) {
    const opening = openAdminClient(url);
    adminClients.set(url, opening);
    return opening;
  }
  const client = await cached.catch(() => undefined);
  if (client?.usable) return client;
  if (adminClients.get(url) === cached) adminClients.delete(url);
  return adminClient(url);
}

async function openAdminClient(url: string): Promise<AdminClient> {
  const client = new pg.Client({ connectionString: url });
  // The idle connection must not keep a process alive once its work is done; a statement in
  // flight must (with nothing else pending, the process would exit while it waits for the answer).
  const socket = () => (client as unknown as { connection: { stream: Socket } }).connection.stream;
  let inFlight = 0;
  // One statement at a time: files whose blocks run at once create their databases at once, and a
  // query sent while another runs is queued by pg with a deprecation warning (refused from pg 9).
  let previous: Promise<unknown> = Promise.resolve();
  const admin: AdminClient = {
    async query(text) {
      if (inFlight++ === 0) socket().ref();
      const statement = previous.then(() => client.query(text));
      previous = statement.catch(() => {});
      try {
        await statement;
      } finally {
        if (--inFlight === 0) socket().unref();
      }
    },
    usable: true,
    end: () => client.end(),
  };
  // The cluster going away (its stop at the run's end) is an error here, not a crash of the process.
  const unusable = () => {
    admin.usable = false;
  };
  client.on("error", unusable);
  client.on("end", unusable);
  await client.connect();
  socket().unref();
  return admin;
}

/** Closes this process's maintenance connections (the run's teardown, before the cluster stops). */
export async function closeAdminClients(): Promise<void> {
  const clients = [...adminClients.values()];
  adminClients.clear();
  await Promise.all(clients.map(async (client) => (await client.catch(() => undefined))?.end()));
}
