import { randomInt } from "node:crypto";
import { createServer } from "node:net";

/**
 * Ports are picked below the kernel's ephemeral range (32768–60999 on Linux, 49152–65535 on
 * macOS), where outgoing connections take their local ports. A port the kernel handed out from
 * that range could be taken, between being picked and being listened on, by a connection another
 * part of the stack opened meanwhile: bench:x402 once stopped at its start on EADDRINUSE so.
 */
const LOWEST = 20_000;
const HIGHEST = 32_767;
const TRIES = 50;

/** A loopback port free now (tests, benches and the soak start servers on them). */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < TRIES; attempt++) {
    const port = randomInt(LOWEST, HIGHEST + 1);
    if (await listens(port)) return port;
  }
  const chosen = await listens(0);
  if (chosen === false) throw new Error("no free loopback port");
  return chosen;
}

/** The port listened on for a moment (the kernel's choice for 0), or false when it is taken. */
function listens(port: number): Promise<number | false> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      const bound = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(bound));
    });
  });
}
