import { randomBytes } from "node:crypto";
import { inject } from "vitest";
import {
  type ConnectDatabaseParams,
  connectDatabase,
  type DatabaseDriver,
  type DatabaseHandle,
} from "../origin/db/client.ts";
import { sleep } from "../shared/sleep.ts";
import { adminQuery, withDatabase } from "./global-setup.ts";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.ts";

export type TestDatabase = {
  url: string;
  name: string;
  handle: DatabaseHandle;
  /** Closes the handle and drops the database. */
  drop(): Promise<void>;
};

export type CreateTestDatabaseParams = {
  driver?: DatabaseDriver;
  neonWsProxy?: string;
  maxConnections?: number;
  /** The pool's bound on one statement (db/client.ts STATEMENT_WAIT_MS unless given). */
  statementWaitMs?: number;
};

/** A fresh, fully migrated database cloned from the run's template (see global-setup.ts). */
export async function createTestDatabase(params: CreateTestDatabaseParams = {}): Promise<TestDatabase> {
  const adminUrl = inject("pgAdminUrl");
  const template = inject("pgTemplate");
  const name = `agents_test_${randomBytes(6).toString("hex")}`;
  await cloneTemplate(adminUrl, name, template);
  const url = withDatabase(adminUrl, name);
  const handle = connectDatabase({
    url,
    driver: params.driver ?? "pg",
    neonWsProxy: params.neonWsProxy,
    maxConnections: params.maxConnections,
    statementWaitMs: params.statementWaitMs,
  });
  return {
    url,
    name,
    handle,
    async drop() {
      await handle.close();
      await adminQuery(adminUrl, `drop database if exists "${name}" with (force)`);
    },
  };
}

async function cloneTemplate(adminUrl: string, name: string, template: string): Promise<void> {
  // Two files cloning at the same instant can see "source database is being accessed": retry.
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(adminUrl, `create database "${name}" template "${template}"`);
      return;
    } catch (error) {
      if (attempt >= 20 || !String(error).includes("being accessed")) throw error;
      await sleep(50 + attempt * 25);
    }
  }
}

/**
 * A pg pool to the database at `url` through a TCP proxy a fault test cuts or stalls (a refused,
 * partitioned or silent link), the database itself staying up. The caller closes both.
 */
export async function databaseBehindProxy(
  url: string,
  pool: Pick<ConnectDatabaseParams, "maxConnections" | "statementWaitMs" | "transactionIdleMs"> = {},
): Promise<{ proxy: TcpProxy; database: DatabaseHandle }> {
  const proxy = await startTcpProxy(`http://${new URL(url).host}`);
  const database = connectDatabase({ url: urlThrough(proxy, url), driver: "pg", maxConnections: 4, ...pool });
  return { proxy, database };
}

/** The database `url` as reached through `proxy` (a tool run as a process is given this one). */
export function urlThrough(proxy: TcpProxy, url: string): string {
  const proxied = new URL(url);
  proxied.host = new URL(proxy.url).host;
  return proxied.toString();
}
