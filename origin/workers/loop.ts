import { errorMessage } from "../../shared/error-message.ts";
import type { Logger } from "../logger.ts";

export type Worker = {
  name: string;
  stop(): Promise<void>;
  /**
   * The ticks this worker's loop has ended so far, for the metrics. Required, so that a wrapper
   * around a loop (one that adds to its stop) cannot drop it: the key-pool refill's and the
   * webhooks' did, and their loops were missing from origin_worker_ticks_total.
   */
  ticks(): WorkerTicks;
  /**
   * Of a worker whose ticks do their heavier work only every so many (the transaction tracker's
   * sweeps, every second where it ticks every 250 ms): the ticks that did it. A test that asserts
   * that a sweep changed nothing waits for sweeps, which ticks do not count.
   */
  sweeps?(): WorkerTicks;
};

/** Ticks a loop has ended: `failed` threw (and was logged), `ok` did not. */
export type WorkerTicks = { ok: number; failed: number };

/** A loop that can be asked to run its next tick now rather than at the end of its period. */
export type WakeableWorker = Worker & {
  /**
   * Runs the tick now if the loop is waiting; if a tick is running, the next one starts as soon as
   * it ends. Wakes while a tick runs count once: they all ask for the same next run.
   */
  wake(): void;
  ticks(): WorkerTicks;
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
  const ticks: WorkerTicks = { ok: 0, failed: 0 };
  const run = (): void => {
    busy = true;
    wokenWhileBusy = false;
    running = tick()
      .then(
        () => {
          ticks.ok++;
        },
        (error: unknown) => {
          ticks.failed++;
          const message = errorMessage(error);
          logger.error({ worker: name, err: { message } }, "worker tick failed");
        },
      )
      .finally(() => {
        busy = false;
        if (!stopped) timer = setTimeout(run, wokenWhileBusy ? 0 : periodMs);
      });
  };
  run();
  return {
    name,
    ticks: () => ({ ...ticks }),
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

/**
 * `fn` called at most once every `gapMs`: the first call at once, later ones within the gap folded
 * into one call when it ends. For wakes that arrive with every commit (the events listener's):
 * under load the woken work runs a bounded number of times a second, each run taking all that
 * came since the last, instead of once per commit.
 */
export function atMostEvery(gapMs: number, fn: () => void): { (): void; cancel(): void } {
  let last = Number.NEGATIVE_INFINITY;
  let pending: NodeJS.Timeout | undefined;
  const fire = (): void => {
    pending = undefined;
    last = performance.now();
    fn();
  };
  const call = (): void => {
    if (pending) return;
    const wait = last + gapMs - performance.now();
    if (wait <= 0) fire();
    else pending = setTimeout(fire, wait);
  };
  call.cancel = (): void => {
    clearTimeout(pending);
    pending = undefined;
  };
  return call;
}
