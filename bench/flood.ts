/**
 * `npm run bench:flood`: what refusing a flood costs the service and the agents beside it, for each
 * limit a flood meets first: registration's attempts a minute (through the edge, from many
 * addresses), the gateway's pre-auth limit (bad tokens) and the facilitator's per-payer window
 * (verify). The stack, the phases and what is printed: bench/flood-phases.ts. BENCH_FLOOD_KINDS
 * (comma-separated: register, bad_tokens, verify) runs some of them; all by default.
 */
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { FLOOD_KINDS, type FloodKind, runFloods } from "./flood-phases.ts";

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

async function main(): Promise<void> {
  const asked = process.env.BENCH_FLOOD_KINDS?.split(",").map((kind) => kind.trim());
  const kinds = asked ? FLOOD_KINDS.filter((kind) => asked.includes(kind)) : FLOOD_KINDS;
  if (asked?.some((kind) => !FLOOD_KINDS.includes(kind as FloodKind)))
    throw new Error(`BENCH_FLOOD_KINDS: one of ${FLOOD_KINDS.join(", ")}`);
  say(`bench:flood — ${kinds.join(", ")}; node ${process.version}`);
  const steal = await startStealMeter();
  const results = await runFloods(kinds, say);
  say("");
  say(await steal());
  for (const { kind, via, met } of results) say(`${kind}, ${via}: ${met ? "met" : "not met"}`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(
      `bench:flood: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
