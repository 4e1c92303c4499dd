import { parseArgs } from "node:util";

export type SoakArgs = {
  /** The measured part of the load, after the warm-up. */
  durationMs: number;
  /** Load before the measured part: memory "after warm-up" is taken when it ends. */
  warmUpMs: number;
  /** Requests started per second, across the mix. */
  rate: number;
  /** Requests in flight at most. */
  concurrency: number;
  /** Ordinary agents (two more run the limit probes). */
  agents: number;
  /** Funded viem accounts paying the x402 demo. */
  payers: number;
  keepData: boolean;
};

export const WARM_UP_DEFAULT_MS = 300_000;

export const SOAK_USAGE =
  "usage: npm run soak -- --minutes N | --seconds N [--warm-up-seconds S] [--rate R] [--concurrency C] [--agents A] [--payers P] [--keep-data]";

/**
 * The warm-up runs before the N minutes, by default for half as long, at most WARM_UP_DEFAULT_MS.
 * Measured (soak timelines, docs/development.md "Soak"): in their first minutes under the mix the origin and
 * the enclave settle after start-up, Postgres fills its shared buffers and Miniflare's workerd
 * climbs from 50 to over 100 MiB; a warm-up of one minute inside the run counted all that as
 * growth.
 */
export function parseSoakArgs(argv: string[]): SoakArgs {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(argv);
  } catch (error) {
    // node's own words (an unknown option, a missing value), then the usage.
    throw new Error(`${error instanceof Error ? error.message : String(error)}; ${SOAK_USAGE}`);
  }
  const { values } = parsed;
  const positive = (name: string, text: string | undefined, fallback: number): number => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isFinite(value) || value <= 0)
      throw new Error(`--${name} must be a positive number; ${SOAK_USAGE}`);
    return value;
  };
  /** A count: a fraction would be rounded, to 0 even (a concurrency of 0 sends nothing). */
  const whole = (name: string, text: string | undefined, fallback: number, least: number): number => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < least)
      throw new Error(`--${name} must be a whole number of at least ${least}; ${SOAK_USAGE}`);
    return value;
  };
  if ((values.minutes === undefined) === (values.seconds === undefined)) throw new Error(SOAK_USAGE);
  const durationMs =
    values.minutes !== undefined
      ? positive("minutes", values.minutes, 0) * 60_000
      : positive("seconds", values.seconds, 0) * 1000;
  const warmUpMs =
    values["warm-up-seconds"] !== undefined
      ? positive("warm-up-seconds", values["warm-up-seconds"], 0) * 1000
      : Math.min(WARM_UP_DEFAULT_MS, durationMs / 2);
  return {
    durationMs,
    warmUpMs,
    rate: positive("rate", values.rate, 30),
    concurrency: whole("concurrency", values.concurrency, 16, 1),
    // Transfers go between the ordinary agents: two at least.
    agents: whole("agents", values.agents, 6, 2),
    payers: whole("payers", values.payers, 4, 1),
    keepData: values["keep-data"] ?? false,
  };
}

function parseOptions(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      minutes: { type: "string" },
      seconds: { type: "string" },
      "warm-up-seconds": { type: "string" },
      rate: { type: "string" },
      concurrency: { type: "string" },
      agents: { type: "string" },
      payers: { type: "string" },
      "keep-data": { type: "boolean" },
    },
  });
}
