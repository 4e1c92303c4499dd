/**
 * The enclave's own server (enclave/server.ts, what enclave/main.ts runs) in the test's process, on
 * a real socket and a data folder initialised by the real `init`, with a clock the test moves. The
 * process reads the system clock, which no test can move to the next UTC day or past a cooldown of
 * a minute; the clock is the one thing that differs from the real process.
 */
import pino from "pino";
import { createEnclaveFixture, type EnclaveFixture } from "../../testing/enclave-process.ts";
import { type EnclaveServer, startEnclaveServer } from "../server.ts";

export type ClockedEnclave = {
  /** The initialised data folder, socket path and authority keys (its process is never started). */
  fixture: EnclaveFixture;
  /** The enclave's clock: every op reads it. */
  clock: { now: () => Date; set: (at: Date) => void; advance: (ms: number) => void };
  /** Stops serving and serves the same data folder again (the sealed state read back from disk). */
  restart: () => Promise<void>;
  close: () => Promise<void>;
};

export async function startClockedEnclave(options: { envId: string; at: Date }): Promise<ClockedEnclave> {
  const fixture = await createEnclaveFixture({ envId: options.envId, start: false });
  let current = options.at.getTime();
  const clock = {
    now: () => new Date(current),
    set: (at: Date) => {
      current = at.getTime();
    },
    advance: (ms: number) => {
      current += ms;
    },
  };
  const serve = (): Promise<EnclaveServer> =>
    startEnclaveServer({
      socketPath: fixture.socketPath,
      dataDir: fixture.dataDir,
      logger: pino({ level: "silent" }),
      now: clock.now,
      verifyStateJournal: true,
    });
  let server = await serve();
  return {
    fixture,
    clock,
    restart: async () => {
      await server.close();
      server = await serve();
    },
    close: async () => {
      await server.close();
      await fixture.dispose();
    },
  };
}
