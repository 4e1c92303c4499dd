import { Client as NeonClient, Pool as NeonPool, neonConfig } from "@neondatabase/serverless";
import { type SQL, sql } from "drizzle-orm";
import { drizzle as drizzleNeon } from "drizzle-orm/neon-serverless";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import pg from "pg";
import WebSocket from "ws";
import * as schema from "./schema.ts";

/** The drizzle handle every query function takes first; a transaction handle passes the same way. */
export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

export type DatabaseDriver = "pg" | "neon";

/** Runs raw SQL and returns its rows; both drivers' results carry `rows`. */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as { rows: T[] };
  return result.rows;
}

/**
 * A timestamptz column read by raw SQL: drizzle's drivers hand these over as text
 * ("2026-11-22 17:10:41.45+00"), which Date parses, or as a Date; either way a Date comes out.
 */
export function toDate(value: Date | string): Date {
  return value instanceof Date ? value : new Date(value);
}

/**
 * A Postgres array literal, to pass a list as one parameter (drizzle spreads a JS array into a
 * list of parameters). For values without quotes, commas, braces or spaces: uuids, hex
 * addresses, numbers and our closed status words. Anything else goes as JSON (json_to_recordset).
 */
export function pgArrayLiteral(values: readonly (string | number | bigint)[]): string {
  for (const value of values) {
    if (!/^[0-9A-Za-z_.:-]*$/.test(String(value))) throw new Error("pgArrayLiteral: a value needs quoting");
  }
  return `{${values.join(",")}}`;
}

/**
 * One connection of its own, outside the pool, for a session that must stay put: `LISTEN`
 * (origin/events/listener.ts). The pool would hand the session back and forget what it listened to.
 */
export type DirectConnection = {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  on(
    event: "notification",
    listener: (message: { channel: string; payload?: string | undefined }) => void,
  ): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  on(event: "end", listener: () => void): unknown;
  end(): Promise<void>;
};

export type DatabaseHandle = {
  db: Db;
  driver: DatabaseDriver;
  /**
   * A new connection to the same database with the same driver, not from the pool; the caller
   * connects and ends it. Give DATABASE_URL the direct endpoint: a transaction-mode pooler drops
   * `LISTEN` (docs/operations.md#neon).
   */
  connectDirect(): DirectConnection;
  /**
   * Runs `work` on a connection of its own, outside the pool, whose statements are not bound by
   * STATEMENT_WAIT_MS: migrations, which may rebuild a large table or wait for another node's.
   */
  unbounded<T>(work: (db: Db) => Promise<T>): Promise<T>;
  /** Round-trips one query; throws when the database is unreachable. */
  ping(): Promise<void>;
  close(): Promise<void>;
};

export type ConnectDatabaseParams = {
  url: string;
  driver?: DatabaseDriver | undefined;
  /** `host:port` of a plain WebSocket-to-TCP relay for the Neon driver (tests, local dev): no TLS. */
  neonWsProxy?: string | undefined;
  maxConnections?: number | undefined;
  /** How long one statement of the pool may go unanswered: STATEMENT_WAIT_MS unless given (tests). */
  statementWaitMs?: number | undefined;
  /** How long a query waits for a connection of the pool: POOL_WAIT_MS unless given (tests). */
  poolWaitMs?: number | undefined;
  /**
   * How long Postgres keeps a transaction of the pool that waits for its next statement:
   * TRANSACTION_IDLE_MS unless given (DATABASE_IDLE_IN_TRANSACTION_MS).
   */
  transactionIdleMs?: number | undefined;
};

/**
 * How long a query waits for a connection of the pool, a new connection's set-up included. Past
 * it the query fails as a database that cannot be reached (db/unavailable.ts: a 503 the client
 * may retry) instead of waiting for good behind connections that are all taken and not coming
 * back (a database that stopped answering) or a server that never answers a connect.
 */
export const POOL_WAIT_MS = 10_000;

/**
 * How long one statement of the pool may go unanswered. Past it the driver drops the connection and
 * the statement fails as a database that went away (db/unavailable.ts: a 503 the client may retry).
 * Without it, a connection gone silent under a statement (a partition, a host that died after taking
 * the query, a frozen server) held its request, and its place in the pool, until TCP gave up, a
 * quarter of an hour later, or for good; the node's requests queued behind it past POOL_WAIT_MS.
 * Every statement on a request's or a worker's path answers in milliseconds, and a transaction
 * holds its locks no longer than an enclave or chain call: well inside it. Migrations run
 * unbounded (DatabaseHandle.unbounded).
 */
export const STATEMENT_WAIT_MS = 30_000;

/**
 * How long Postgres lets a transaction of the pool wait for its next statement before it ends the
 * session, and the transaction with it (idle_in_transaction_session_timeout, set on each
 * connection). A link that dies without either end being told (a partition, a NAT or a balancer
 * that forgot the flow, a frozen host) leaves the transaction's backend waiting for a statement
 * that never comes; without a bound it kept its row locks (a sender's nonce row, the registration
 * policy row) until TCP keepalive gave up, over two hours with Linux's defaults, and every other
 * origin's transfer of those senders, or every public registration, queued behind them.
 * The longest wait a transaction of the service makes between two statements is a money batch's:
 * its chain reads (CHAIN_RPC_TIMEOUT_MS, at most 20 s with money on) and then the enclave's
 * signature (10 s), which config.ts keeps within STATEMENT_WAIT_MS; this is four times that.
 */
export const TRANSACTION_IDLE_MS = 120_000;

/**
 * TCP keepalive of the server's end of the pool's connections and of those of their own
 * (DatabaseHandle.unbounded): a peer that stopped answering is noticed after about two minutes
 * (60 s idle, then 6 probes 10 s apart) instead of Linux's two hours and more. It ends what the
 * idle bound does not reach: a migration's or a sweep's lock held on a connection of its own. A
 * live peer answers the probes from its kernel, so nothing legitimate is cut. Postgres ignores
 * them on a Unix socket.
 */
const SERVER_KEEPALIVE = {
  tcp_keepalives_idle: 60,
  tcp_keepalives_interval: 10,
  tcp_keepalives_count: 6,
} as const;

/**
 * One statement setting each of `settings` for the session: one statement, not several, as
 * pipeline mode sends everything as an extended-protocol query, which takes one.
 */
function sessionSettings(settings: Record<string, number>): string {
  const each = Object.entries(settings).map(
    ([name, value]) => `set_config('${name}', '${Math.trunc(value)}', false)`,
  );
  return `select ${each.join(", ")}`;
}

/** A Neon host or DATABASE_DRIVER=neon selects the serverless driver; anything else is pg. */
export function selectDriver(url: string, explicit?: DatabaseDriver): DatabaseDriver {
  if (explicit) return explicit;
  const host = new URL(url).hostname;
  return host.endsWith(".neon.tech") || host.endsWith(".neon.build") ? "neon" : "pg";
}

export function connectDatabase(params: ConnectDatabaseParams): DatabaseHandle {
  const driver = selectDriver(params.url, params.driver);
  const max = params.maxConnections ?? 10;
  const statementWait = params.statementWaitMs ?? STATEMENT_WAIT_MS;
  const poolWait = params.poolWaitMs ?? POOL_WAIT_MS;
  const sessionBounds = boundsSessions({
    idleMs: params.transactionIdleMs ?? TRANSACTION_IDLE_MS,
    statementWaitMs: statementWait,
  });
  if (driver === "neon") {
    configureNeon(params.neonWsProxy);
    const pool = new NeonPool({
      connectionString: params.url,
      max,
      connectionTimeoutMillis: poolWait,
      query_timeout: statementWait,
    });
    // A dropped WebSocket surfaces here; without a listener node would crash the process.
    pool.on("error", () => {});
    pool.on("connect", survivesLostConnection);
    pool.on("connect", plansOnce);
    pool.on("connect", sessionBounds);
    const db = drizzleNeon({ client: pool, schema }) as unknown as Db;
    const direct = (): DirectConnection =>
      new NeonClient({ connectionString: params.url }) as unknown as DirectConnection;
    const unbounded = (client: DirectConnection): Db =>
      drizzleNeon({ client: client as unknown as NeonClient, schema }) as unknown as Db;
    return handle({ db, driver, connectDirect: direct, dbOf: unbounded, end: () => pool.end() });
  }
  // Pipeline mode: statements issued without waiting go out at once (db/pipelined-transaction.ts);
  // one awaited after another behave as without it.
  const pool = new pg.Pool({
    connectionString: params.url,
    max,
    connectionTimeoutMillis: poolWait,
    // Pipeline mode drops the connection of a statement past it, and with it those queued behind.
    query_timeout: statementWait,
    pipeline: true,
  } as pg.PoolConfig);
  pool.on("error", () => {});
  pool.on("connect", survivesLostConnection);
  pool.on("connect", plansOnce);
  pool.on("connect", sessionBounds);
  const db = drizzlePg({ client: pool, schema }) as unknown as Db;
  const direct = (): DirectConnection =>
    new pg.Client({ connectionString: params.url }) as unknown as DirectConnection;
  const unbounded = (client: DirectConnection): Db =>
    drizzlePg({ client: client as unknown as pg.Client, schema }) as unknown as Db;
  return handle({ db, driver, connectDirect: direct, dbOf: unbounded, end: () => pool.end() });
}

/**
 * The pool listens for errors of idle clients only. A client checked out (a transaction waiting on
 * the enclave, say) whose connection ends — a database restart — emits `error` with nobody
 * listening, which would crash the process. With this listener the error reaches the client's
 * pending or next query instead (a 503 to that request, db/unavailable.ts), and the pool drops the
 * broken client when it is released.
 */
function survivesLostConnection(client: { on(event: "error", listener: () => void): unknown }): void {
  client.on("error", () => {});
}

/**
 * How long after the pool's own statement bound Postgres ends the statement itself
 * (statement_timeout). The pool gives up on a statement at STATEMENT_WAIT_MS and drops its
 * connection, but Postgres learns of that only when the statement answers: one queued at a lock
 * held for minutes (a transaction whose origin's link died, until TRANSACTION_IDLE_MS ends it) kept
 * its backend, and a connection slot of the server, all that time, and every retry of every origin
 * left another until the server refused connections to all of them. The statement's own clock
 * starts when Postgres takes it, after the pool's, so with this margin it never ends a statement
 * the pool still waits on.
 */
const ABANDONED_STATEMENT_GRACE_MS = 5_000;

/**
 * The session's bounds, set on each connection of the pool before it is handed out: Postgres ends
 * a transaction left waiting longer than `idleMs` for its next statement (TRANSACTION_IDLE_MS says
 * why) and a statement the pool gave up on (ABANDONED_STATEMENT_GRACE_MS), and notices a dead
 * peer (SERVER_KEEPALIVE). Set on the session, so a plain Postgres, the embedded one and Neon all
 * honour them whatever their own configuration.
 */
function boundsSessions(bounds: {
  idleMs: number;
  statementWaitMs: number;
}): (client: { query(text: string): Promise<unknown> }) => void {
  const statement = sessionSettings({
    idle_in_transaction_session_timeout: bounds.idleMs,
    statement_timeout: bounds.statementWaitMs + ABANDONED_STATEMENT_GRACE_MS,
    ...SERVER_KEEPALIVE,
  });
  return (client) => {
    client.query(statement).catch(() => {
      // A connection that fails here fails its first real query too, which reports it.
    });
  };
}

/**
 * Named statements (db/prepared.ts, the token lookup) are planned once per connection and the plan
 * reused. Left to itself Postgres keeps planning a statement whose parameters are arrays or JSON
 * for every run (a plan made for the actual values always looks cheaper than the shared one), and
 * for the money statements that planning cost more than running them. Unnamed statements, every
 * other query, are planned on each run whatever this says. Queued before the pool hands the
 * connection out, so it is in force for the connection's first query.
 */
function plansOnce(client: { query(text: string): Promise<unknown> }): void {
  client.query("set plan_cache_mode = force_generic_plan").catch(() => {
    // A connection that fails here fails its first real query too, which reports it.
  });
}

function handle(parts: {
  db: Db;
  driver: DatabaseDriver;
  connectDirect: () => DirectConnection;
  /** A drizzle handle over a direct connection. */
  dbOf: (client: DirectConnection) => Db;
  end: () => Promise<void>;
}): DatabaseHandle {
  const { db, driver, connectDirect, dbOf, end } = parts;
  let closed: Promise<void> | undefined;
  return {
    db,
    driver,
    connectDirect,
    async unbounded(work) {
      const client = connectDirect();
      // An error of the connection between statements reaches the next statement instead.
      client.on("error", () => {});
      await client.connect();
      try {
        // No idle bound here (a sweep's lock waits idle through its tick), but a dead peer ends.
        await client.query(sessionSettings(SERVER_KEEPALIVE));
        return await work(dbOf(client));
      } finally {
        await client.end().catch(() => {});
      }
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
    close() {
      closed ??= end();
      return closed;
    },
  };
}

function configureNeon(wsProxy: string | undefined): void {
  // Node 20 has no global WebSocket; the driver needs a constructor.
  neonConfig.webSocketConstructor = WebSocket;
  if (wsProxy) {
    neonConfig.wsProxy = (host, port) => `${wsProxy}/v2?address=${host}:${port}`;
    neonConfig.useSecureWebSocket = false;
    neonConfig.pipelineTLS = false;
    neonConfig.pipelineConnect = false;
  }
}
