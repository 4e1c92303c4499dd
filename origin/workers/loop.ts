import { errorMessage } from "../../shared/error-message.ts";
import type { Logger } from "../logger.ts";

export type Worker = { name: string; stop(): Promise<void> };

/**
 * Runs `tick` now and then `periodMs` after each run ends (never overlapping itself). A thrown
 * error is logged and the loop goes on; stop() waits for the run in progress.
 */
export function startLoop(name: string, periodMs: number, logger: Logger, tick: () => Promise<void>): Worker {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const run = (): void => {
    running = tick()
      .catch((error: unknown) => {
        const message = errorMessage(error);
        logger.error({ worker: name, err: { message } }, "worker tick failed");
      })
      .finally(() => {
        if (!stopped) timer = setTimeout(run, periodMs);
      });
  };
  run();
  return {
    name,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
