import { errorMessage } from "../../shared/error-message.ts";
import type { Logger } from "../logger.ts";

export type Worker = { name: string; stop(): Promise<void> };

/** A loop that can be asked to run its next tick now rather than at the end of its period. */
export type WakeableWorker = Worker & {
  /**
   * Runs the tick now if the loop is waiting; if a tick is running, the next one starts as soon as
   * it ends. Wakes while a tick runs count once: they all ask for the same next run.
   */
  wake(): void;
};

/**
 * Runs `tick` now and then `periodMs` after each run ends (never overlapping itself). A thrown
 * error is logged and the loop goes on; stop() waits for the run in progress.
 */
export function startLoop(
  name: string,
  periodMs: number,
  logger: Logger,
  tick: () => Promise<void>,
): WakeableWorker {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let busy = false;
  let wokenWhileBusy = false;
  let running: Promise<void> = Promise.resolve();
  const run = (): void => {
    busy = true;
    wokenWhileBusy = false;
    running = tick()
      .catch((error: unknown) => {
        const message = errorMessage(error);
        logger.error({ worker: name, err: { message } }, "worker tick failed");
      })
      .finally(() => {
        busy = false;
        if (!stopped) timer = setTimeout(run, wokenWhileBusy ? 0 : periodMs);
      });
  };
  run();
  return {
    name,
    wake() {
      if (stopped) return;
      if (busy) {
        wokenWhileBusy = true;
        return;
      }
      clearTimeout(timer);
      run();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
