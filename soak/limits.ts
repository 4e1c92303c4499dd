/**
 * What the soak saw of each limit, and the line it prints for it: expected against observed, and
 * whether the limit held (never more allowed than its number) and was exercised (refused at least
 * once in the run, so the line proves something).
 */
import { PER_AGENT_REQUESTS, PRE_AUTH_FAILURES } from "../origin/gateway/limits.ts";

/** The initial registration policy, as a fresh database holds it. */
export const REGISTRATION_PER_IP_DAILY = 3;
export const REGISTRATION_NETWORK_DAILY = 100;

export type ProbeOutcome = { status: number; code?: string; detail?: string };

export class LimitObservations {
  /**
   * Registrations issued (201) and refused (429) per UTC day and client address (key "day ip"):
   * the quotas start again at midnight, which a soak of 15 minutes may cross.
   */
  readonly registrations = new Map<string, { issued: number; refused: number }>();
  /** Server times (ms) of the faucet payouts accepted per agent. */
  readonly faucetPayouts = new Map<string, number[]>();
  faucetCooldownRefusals = 0;
  faucetDailyRefusals = 0;
  /** When each 401 of the bad-token traffic was sent and answered, per client address. */
  readonly authFailures = new Map<string, Span[]>();
  preAuthRefusals = 0;
  /** When each accepted request of the post-auth burst was sent and answered; how many it had refused. */
  readonly burstAccepted: Span[] = [];
  burstRefused = 0;
  /** The transfer of exactly the per-transaction limit (its maximum fee makes it one unit too many). */
  perTransaction: ProbeOutcome | undefined;
  /** Transfers of the daily-limit probe: accepted units, and the refusal that ended them. */
  dailyAcceptedUnits = 0n;
  dailyAccepted = 0;
  dailyRefusal: ProbeOutcome | undefined;

  /** `answeredAt`: when the answer came (ms); its UTC day is taken as the server's. */
  registration(ip: string, status: number, answeredAt = Date.now()): void {
    const key = `${new Date(answeredAt).toISOString().slice(0, 10)} ${ip}`;
    const entry = this.registrations.get(key) ?? { issued: 0, refused: 0 };
    if (status === 201) entry.issued++;
    if (status === 429) entry.refused++;
    this.registrations.set(key, entry);
  }

  faucet(agentId: string, status: number, code: string | undefined, createdAt: string | undefined): void {
    if ((status === 200 || status === 202) && createdAt) {
      this.faucetPayouts.set(agentId, [...(this.faucetPayouts.get(agentId) ?? []), Date.parse(createdAt)]);
    }
    if (code === "faucet_cooldown") this.faucetCooldownRefusals++;
    if (code === "faucet_daily_limit") this.faucetDailyRefusals++;
  }

  badToken(ip: string, status: number, span: Span): void {
    if (status === 401) this.authFailures.set(ip, [...(this.authFailures.get(ip) ?? []), span]);
    if (status === 429) this.preAuthRefusals++;
  }
}

export type LimitLine = {
  name: string;
  expected: string;
  observed: string;
  held: boolean;
  exercised: boolean;
};

/** A request's client-side times (ms): the server counted it at some moment between the two. */
export type Span = { sent: number; answered: number };

/**
 * The most requests the server surely counted within one window of `windowMs`: those sent at or
 * after the window's start and answered before its end. The client cannot see the moment the
 * server counted each (answers come late under load), so counting by answer time alone would show
 * a limiter that held as broken; this count never exceeds what the server saw in that window.
 */
export function mostSurelyInWindow(spans: readonly Span[], windowMs: number): number {
  let most = 0;
  for (const { sent: start } of spans) {
    const inside = spans.filter((span) => span.sent >= start && span.answered < start + windowMs).length;
    most = Math.max(most, inside);
  }
  return most;
}

/** The real time a whole-second window of `seconds` surely covers (shared/rate-limiter.ts). */
const wholeSecondWindowMs = (seconds: number): number => (seconds - 1) * 1000;

export function limitLines(
  seen: LimitObservations,
  limits: { faucetCooldownMs: number; transferPerTxUnits: bigint; transferDailyUnits: bigint },
): LimitLine[] {
  const perIp = [...seen.registrations.values()];
  const issued = perIp.reduce((sum, entry) => sum + entry.issued, 0);
  const refusedRegistrations = perIp.reduce((sum, entry) => sum + entry.refused, 0);
  const mostPerIp = Math.max(0, ...perIp.map((entry) => entry.issued));
  const ipsAtQuota = perIp.filter((entry) => entry.issued >= REGISTRATION_PER_IP_DAILY).length;
  const keys = [...seen.registrations.keys()].map((key) => key.split(" "));
  const ips = new Set(keys.map(([, ip]) => ip)).size;
  const issuedByDay = new Map<string, number>();
  for (const [key, entry] of seen.registrations) {
    const day = key.split(" ")[0]!;
    issuedByDay.set(day, (issuedByDay.get(day) ?? 0) + entry.issued);
  }
  const mostInADay = Math.max(0, ...issuedByDay.values());
  const overDays = issuedByDay.size > 1 ? ` (${issuedByDay.size} UTC days, counted per day)` : "";

  const gaps = [...seen.faucetPayouts.values()].flatMap((times) => {
    const sorted = [...times].sort((a, b) => a - b);
    return sorted.slice(1).map((time, i) => time - sorted[i]!);
  });
  const shortestGap = gaps.length > 0 ? Math.min(...gaps) : undefined;

  // The origin's limiter counts whole seconds: a window of N seconds is the current second and the
  // N−1 before it, so what it promises is the limit in any N−1 seconds of real time.
  const failureWindows = [...seen.authFailures.values()].map((spans) =>
    mostSurelyInWindow(spans, wholeSecondWindowMs(PRE_AUTH_FAILURES.windowSeconds)),
  );
  const mostFailures = Math.max(0, ...failureWindows);
  const mostBurst = mostSurelyInWindow(
    seen.burstAccepted,
    wholeSecondWindowMs(PER_AGENT_REQUESTS.windowSeconds),
  );

  const perTx = seen.perTransaction;
  const daily = seen.dailyRefusal;
  return [
    {
      name: "registrations per IP per UTC day",
      expected: `≤ ${REGISTRATION_PER_IP_DAILY} issued per IP, then 429`,
      observed: `most ${mostPerIp} on one IP of ${ips}; ${ipsAtQuota} IPs at quota; ${refusedRegistrations} refused (429)${overDays}`,
      held: mostPerIp <= REGISTRATION_PER_IP_DAILY,
      exercised: ipsAtQuota > 0 && refusedRegistrations > 0,
    },
    {
      name: "registrations network-wide per UTC day",
      expected: `≤ ${REGISTRATION_NETWORK_DAILY} issued, then 429`,
      observed: `${issued} issued${overDays ? `, most ${mostInADay} in one day${overDays}` : ""}`,
      held: mostInADay <= REGISTRATION_NETWORK_DAILY,
      exercised: mostInADay === REGISTRATION_NETWORK_DAILY && refusedRegistrations > 0,
    },
    {
      name: "faucet cooldown per agent",
      expected: `payouts ≥ ${limits.faucetCooldownMs / 1000} s apart, else 429 faucet_cooldown`,
      observed: `${gaps.length + seen.faucetPayouts.size} payouts, shortest gap ${shortestGap === undefined ? "n/a" : `${(shortestGap / 1000).toFixed(1)} s`}; ${seen.faucetCooldownRefusals} refused`,
      held: shortestGap === undefined || shortestGap >= limits.faucetCooldownMs,
      exercised: seen.faucetCooldownRefusals > 0,
    },
    {
      name: "transfer per-transaction limit",
      expected: `${limits.transferPerTxUnits} units plus fee refused: 403 limit_exceeded`,
      observed: perTx ? `${perTx.status} ${perTx.code ?? ""} ${perTx.detail ?? ""}`.trim() : "not probed",
      held: perTx?.status === 403 && perTx.code === "limit_exceeded",
      exercised: perTx !== undefined,
    },
    {
      name: "transfer daily limit (one agent)",
      expected: `≤ ${limits.transferDailyUnits} units a day (value plus fee), then 403 limit_exceeded`,
      observed: `${seen.dailyAccepted} accepted, ${seen.dailyAcceptedUnits} units; then ${daily ? `${daily.status} ${daily.code ?? ""} ${daily.detail ?? ""}`.trim() : "no refusal"}`,
      held: seen.dailyAcceptedUnits <= limits.transferDailyUnits,
      exercised: daily?.status === 403 && daily.code === "limit_exceeded",
    },
    {
      name: "failed authentications per IP (pre-auth)",
      expected: `≤ ${PRE_AUTH_FAILURES.limit} 401 per IP in ${PRE_AUTH_FAILURES.windowSeconds} whole seconds, then 429`,
      observed: `most ${mostFailures} in a window; ${seen.preAuthRefusals} refused (429)`,
      held: mostFailures <= PRE_AUTH_FAILURES.limit,
      exercised: seen.preAuthRefusals > 0,
    },
    {
      name: "requests per agent (post-auth)",
      expected: `≤ ${PER_AGENT_REQUESTS.limit} per agent in ${PER_AGENT_REQUESTS.windowSeconds} whole seconds, then 429`,
      observed: `burst: most ${mostBurst} accepted in a window; ${seen.burstRefused} refused (429)`,
      held: mostBurst <= PER_AGENT_REQUESTS.limit,
      exercised: seen.burstRefused > 0,
    },
  ];
}
