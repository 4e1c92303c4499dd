/**
 * Gathers work that arrives together into batches (token lookups, registration's steps, money
 * actions, x402 settlements): an item joins the open batch; a batch starts on the next turn of the
 * event loop if fewer than `maxInFlight` are running, and otherwise keeps gathering until one
 * returns. A sequential caller waits for nothing; concurrent callers share one batch's round trips.
 * Batches start in the order they opened, so items are handled in arrival order.
 */
export type BatcherOptions<T> = {
  maxBatch: number;
  maxInFlight: number;
  /** Items of one batch share this key (a day, a minute and its limits): another key opens a new batch. */
  keyOf?: (item: T) => string;
};

export type Batcher<T, R> = (item: T) => Promise<R>;

/** `run` answers a batch with one result per item, in order; if it throws, every item rejects. */
export function createBatcher<T, R>(
  run: (items: T[]) => Promise<R[]>,
  options: BatcherOptions<T>,
): Batcher<T, R> {
  type Waiter = { item: T; resolve: (result: R) => void; reject: (error: unknown) => void };
  type Batch = Waiter[] & { key?: string };
  let open: Batch | null = null;
  const queue: Batch[] = [];
  let inFlight = 0;

  const pump = (): void => {
    while (inFlight < options.maxInFlight && queue.length > 0) {
      const batch = queue.shift()!;
      if (batch === open) open = null;
      inFlight++;
      run(batch.map((waiter) => waiter.item))
        .then(
          (results) => {
            for (const [index, waiter] of batch.entries()) waiter.resolve(results[index]!);
          },
          (error: unknown) => {
            for (const waiter of batch) waiter.reject(error);
          },
        )
        .finally(() => {
          inFlight--;
          pump();
        });
    }
  };

  return (item) =>
    new Promise<R>((resolve, reject) => {
      const key = options.keyOf?.(item);
      let batch = open;
      if (!batch || batch.key !== key) {
        batch = Object.assign([], { key });
        open = batch;
        queue.push(batch);
        setImmediate(pump);
      }
      batch.push({ item, resolve, reject });
      if (batch.length >= options.maxBatch) {
        open = null;
        pump();
      }
    });
}
