/**
 * A devnet in its own process, as npm start and the tests run it, for bench:devnet: the load
 * then comes from another process and the devnet's main thread does only the devnet's work.
 * Env: BENCH_MAX_TXS_PER_BLOCK (unset: no count limit). Prints its URL on one line once listening;
 * exits when its parent goes (the IPC channel closes) or on SIGTERM.
 */
import { startDevnet } from "../devnet/index.ts";

const maxTxsPerBlock = process.env.BENCH_MAX_TXS_PER_BLOCK
  ? Number(process.env.BENCH_MAX_TXS_PER_BLOCK)
  : undefined;
const devnet = await startDevnet({ port: 0, maxTxsPerBlock });
const stop = async (): Promise<void> => {
  await devnet.close();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("disconnect", () => void stop());
process.stdout.write(`${devnet.url}\n`);
