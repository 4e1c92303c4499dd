/**
 * A load driver for fault tests (and, later, the soak): N concurrent loops issuing a weighted mix
 * of requests against an origin (or the edge), recording every request's outcome and every action
 * id it was told of, until stopped. A fault is injected while it runs; afterwards `settle()`
 * repeats, with the same idempotency key, each money request that got no final answer, as a client
 * told "a retry is safe" does, and the test audits what the service did (testing/load-audit.ts).
 *
 * Request kinds are values (`RequestKind`), so a new surface joins the mix by passing one more:
 * the x402 payment flow, say, is a kind whose `run` asks for the quote, authorizes and pays, each
 * step through `ctx.send`.
 */
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";

/** An HTTP status, or what happened instead of one. */
export type LoadStatus =
  | number
  /** The connection was refused: nothing reached the server. */
  | "refused"
  /** The connection closed after the request was sent, with no answer: a request cut off. */
  | "cut"
  /** No answer within the driver's deadline: a hang. */
  | "timeout";

export type LoadRecord = {
  /** The kind's name, or the label its `send` gave (`transfer`, `transfer:retry`, …). */
  kind: string;
  status: LoadStatus;
  /** The gateway's `error.code`, or `rpc:<code>` for a JSON-RPC error answered with 200. */
  code: string | undefined;
  actionId: string | undefined;
  startedAt: number;
  endedAt: number;
  loop: number;
  /** The request's number in this driver, in the order sent (see `pending()`). */
  serial: number;
};

/** A request sent and not answered yet. */
export type PendingRequest = { serial: number; kind: string };

export type LoadAgent = { token: string; agentId?: string; wallet?: string };

export type LoadRequest = {
  method: "GET" | "POST";
  /** Relative to the base: `/agent/v1/balance`. */
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** Sent without the agent's bearer token (registration). */
  anonymous?: boolean;
  /**
   * Safe to repeat as it is (an idempotency key or a payment nonce inside): without a final
   * answer (a 5xx, a cut, a hang) it is sent again by settle(). A refused connection carried
   * nothing, so it created nothing that could be lost: it is not repeated.
   */
  idempotent?: boolean;
};

export type LoadAnswer = { record: LoadRecord; body: unknown };

export type KindContext = {
  agent: LoadAgent;
  loop: number;
  /** Sends one request through the driver: recorded, its action id noted, retried if idempotent. */
  send(request: LoadRequest, label?: string): Promise<LoadAnswer>;
};

export type RequestKind = {
  name: string;
  /** Relative share of the mix; 1 by default. */
  weight?: number;
  run(ctx: KindContext): Promise<void>;
};

/** What the driver learnt of one action: the last answer that named it. */
export type SeenAction = { actionId: string; kind: string; agent: LoadAgent; lastStatus: LoadStatus };

export type LoadDriverParams = {
  /** The base URL (`http://127.0.0.1:port/77`), or a function when the target moves (a restart). */
  base: string | (() => string);
  agents: LoadAgent[];
  kinds: RequestKind[];
  loops: number;
  /** Pause of each loop between requests (keeps agents under the per-agent rate limit). */
  pauseMs?: number;
  /** Extra pause after an answer that is not final (a client backing off); 250 ms by default. */
  backoffMs?: number;
  /** A request without an answer after this long is recorded as `timeout`. */
  requestTimeoutMs?: number;
};

export type LoadSummary = {
  total: number;
  /** `kind → "status code" → count`, e.g. `transfer → "503 agent_signer_unavailable" → 4`. */
  byKind: Record<string, Record<string, number>>;
  actions: number;
};

export type LoadDriver = {
  records: LoadRecord[];
  /** Every action id an answer named, with the latest answer about it. */
  actions: Map<string, SeenAction>;
  /** Public identities registered under load: their agent ids. */
  registered: string[];
  /** Requests sent and not answered yet; their records, once answered, carry the same serial. */
  pending(): PendingRequest[];
  /** Stops the loops after their current request; resolves when all have. */
  stop(): Promise<void>;
  /**
   * After stop(): sends again every idempotent request that got no final answer, until each gets
   * one (or `timeoutMs` passes); resolves with those still without one.
   */
  settle(options?: { timeoutMs?: number; pauseMs?: number }): Promise<LoadRequest[]>;
  summary(): LoadSummary;
  /** One line per kind: `transfer: 202×40 503 agent_signer_unavailable×4`. */
  describe(): string;
};

export function startLoadDriver(params: LoadDriverParams): LoadDriver {
  const base = typeof params.base === "string" ? () => params.base as string : params.base;
  const records: LoadRecord[] = [];
  const pending = new Map<number, PendingRequest>();
  let serials = 0;
  const actions = new Map<string, SeenAction>();
  const registered: string[] = [];
  const unanswered = new Map<LoadRequest, { agent: LoadAgent; label: string }>();
  const totalWeight = params.kinds.reduce((sum, kind) => sum + (kind.weight ?? 1), 0);
  let stopping = false;

  const pick = (): RequestKind => {
    let at = Math.random() * totalWeight;
    for (const kind of params.kinds) {
      at -= kind.weight ?? 1;
      if (at < 0) return kind;
    }
    return params.kinds[params.kinds.length - 1]!;
  };

  const sendFor =
    (agent: LoadAgent, loop: number, defaultLabel: string) =>
    async (req: LoadRequest, label = defaultLabel): Promise<LoadAnswer> => {
      const startedAt = Date.now();
      const serial = serials++;
      pending.set(serial, { serial, kind: label });
      const { status, body } = await exchange(base(), req, agent, params.requestTimeoutMs ?? 15_000).finally(
        () => pending.delete(serial),
      );
      const envelope = body as { error?: { code?: unknown; action_id?: unknown }; action_id?: unknown };
      const rpcError = (Array.isArray(body) ? body : [body]).find(
        (item) => item && typeof item === "object" && "jsonrpc" in item && "error" in item,
      ) as { error?: { code?: unknown } } | undefined;
      const code =
        typeof envelope?.error?.code === "string"
          ? envelope.error.code
          : rpcError
            ? `rpc:${String(rpcError.error?.code)}`
            : undefined;
      const actionId =
        typeof envelope?.action_id === "string"
          ? envelope.action_id
          : typeof envelope?.error?.action_id === "string"
            ? envelope.error.action_id
            : undefined;
      const record: LoadRecord = {
        kind: label,
        status,
        code,
        actionId,
        startedAt,
        endedAt: Date.now(),
        loop,
        serial,
      };
      records.push(record);
      if (actionId)
        actions.set(actionId, { actionId, kind: label.replace(/:retry$/, ""), agent, lastStatus: status });
      if (status === 201 && typeof (body as { agent_id?: unknown }).agent_id === "string") {
        registered.push((body as { agent_id: string }).agent_id);
      }
      if (req.idempotent) {
        if (isFinal(status) || status === "refused") unanswered.delete(req);
        else unanswered.set(req, { agent, label: label.replace(/:retry$/, "") });
      }
      return { record, body };
    };

  const loops = Array.from({ length: params.loops }, async (_, loop) => {
    const agent = params.agents[loop % params.agents.length]!;
    while (!stopping) {
      const kind = pick();
      let failed = false;
      const send = sendFor(agent, loop, kind.name);
      await kind.run({
        agent,
        loop,
        send: async (req, label) => {
          const answer = await send(req, label);
          failed ||= !isFinal(answer.record.status);
          return answer;
        },
      });
      const pause = (params.pauseMs ?? 0) + (failed ? (params.backoffMs ?? 250) : 0);
      if (pause > 0) await sleep(pause);
    }
  });

  const summary = (): LoadSummary => {
    const byKind: LoadSummary["byKind"] = {};
    for (const record of records) {
      const key = record.code ? `${record.status} ${record.code}` : String(record.status);
      const kind = byKind[record.kind] ?? {};
      kind[key] = (kind[key] ?? 0) + 1;
      byKind[record.kind] = kind;
    }
    return { total: records.length, byKind, actions: actions.size };
  };

  return {
    records,
    actions,
    registered,
    pending: () => [...pending.values()],
    async stop() {
      stopping = true;
      await Promise.all(loops);
    },
    async settle(options = {}) {
      const deadline = Date.now() + (options.timeoutMs ?? 20_000);
      while (unanswered.size > 0 && Date.now() < deadline) {
        for (const [req, { agent, label }] of [...unanswered]) {
          await sendFor(agent, -1, label)(req, `${label}:retry`);
        }
        if (unanswered.size > 0) await sleep(options.pauseMs ?? 250);
      }
      return [...unanswered.keys()];
    },
    summary,
    describe() {
      return Object.entries(summary().byKind)
        .map(
          ([kind, counts]) =>
            `${kind}: ${Object.entries(counts)
              .map(([key, n]) => `${key}×${n}`)
              .join(" ")}`,
        )
        .join("\n");
    },
  };
}

/** A final answer: the service decided (2xx, 4xx); a 5xx, a refusal, a cut or a hang is not one. */
export function isFinal(status: LoadStatus): boolean {
  return typeof status === "number" && status < 500;
}

/**
 * One request on a fresh connection (as many clients behave, and so a drain can be seen: a
 * connection refused never carried the request, a connection cut did).
 */
function exchange(
  base: string,
  req: LoadRequest,
  agent: LoadAgent,
  timeoutMs: number,
): Promise<{ status: LoadStatus; body: unknown }> {
  return new Promise((resolve) => {
    let sent = false;
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    const outgoing = request(
      `${base}${req.path}`,
      {
        method: req.method,
        agent: false,
        headers: {
          ...(req.anonymous ? {} : { authorization: `Bearer ${agent.token}` }),
          ...(payload === undefined ? {} : { "content-type": "application/json" }),
          ...req.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString("utf8");
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on("error", () => finish("cut"));
      },
    );
    const finish = (status: LoadStatus): void => {
      clearTimeout(timer);
      resolve({ status, body: undefined });
    };
    const timer = setTimeout(() => {
      finish("timeout");
      outgoing.destroy();
    }, timeoutMs);
    outgoing.on("socket", (socket) => socket.on("connect", () => (sent = true)));
    outgoing.on("error", (error: NodeJS.ErrnoException) =>
      finish(!sent && error.code === "ECONNREFUSED" ? "refused" : "cut"),
    );
    outgoing.end(payload);
  });
}

export const newIdempotencyKey = (): string => `load-${randomBytes(8).toString("hex")}`;

/** GET /agent/v1/balance, GET /agent/v1/network and a POST /agent/v1/rpc batch. */
export function readKinds(weights: { balance?: number; network?: number; rpc?: number } = {}): RequestKind[] {
  return [
    {
      name: "balance",
      weight: weights.balance ?? 2,
      run: async (ctx) => void (await ctx.send({ method: "GET", path: "/agent/v1/balance" })),
    },
    {
      name: "network",
      weight: weights.network ?? 1,
      run: async (ctx) => void (await ctx.send({ method: "GET", path: "/agent/v1/network" })),
    },
    {
      name: "rpc",
      weight: weights.rpc ?? 2,
      run: async (ctx) =>
        void (await ctx.send({
          method: "POST",
          path: "/agent/v1/rpc",
          body: [
            { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] },
            { jsonrpc: "2.0", id: 2, method: "eth_getBalance", params: [ctx.agent.wallet, "latest"] },
          ],
        })),
    },
  ];
}

/** POST /agent/v1/transfers with a fresh idempotency key each time. */
export function transferKind(params: {
  to: () => string;
  amountUnits: bigint;
  weight?: number;
}): RequestKind {
  return {
    name: "transfer",
    weight: params.weight ?? 3,
    run: async (ctx) =>
      void (await ctx.send({
        method: "POST",
        path: "/agent/v1/transfers",
        body: {
          idempotency_key: newIdempotencyKey(),
          to: params.to(),
          amount: params.amountUnits.toString(),
        },
        idempotent: true,
      })),
  };
}

/** POST /agent/v1/faucet with a fresh idempotency key each time. */
export function faucetKind(weight = 1): RequestKind {
  return {
    name: "faucet",
    weight,
    run: async (ctx) =>
      void (await ctx.send({
        method: "POST",
        path: "/agent/v1/faucet",
        body: { idempotency_key: newIdempotencyKey() },
        idempotent: true,
      })),
  };
}

/**
 * POST /agent/v1/register as the edge forwards it (its secret, a public client IP per call). Never
 * repeated (a lost answer may already have created the identity).
 */
export function registerKind(params: { edgeSecret: string; weight?: number }): RequestKind {
  let next = 1;
  return {
    name: "register",
    weight: params.weight ?? 1,
    run: async (ctx) => {
      // 81.3.0.0/16: ordinary unicast space, one address per registration (per-IP quotas apart).
      const n = next++;
      await ctx.send({
        method: "POST",
        path: "/agent/v1/register",
        anonymous: true,
        headers: {
          [HEADER_REGISTRATION]: "1",
          [HEADER_EDGE_SECRET]: params.edgeSecret,
          [HEADER_REGISTRATION_IP]: `81.3.${(n >> 8) & 255}.${n & 255}`,
        },
        body: {},
      });
    },
  };
}
