/**
 * Gathers work that arrives together into batches (the pattern of the token lookups and of
 * registration issuance): an item joins the open batch; a batch starts on the next turn of the
 * event loop if fewer than `maxInFlight` are running, and otherwise keeps gathering until one
 * returns. A sequential caller waits for nothing; concurrent callers share one batch's round trips.
 */
export type BatcherOptions = { maxBatch: number; maxInFlight: number };

export type Batcher<T, R> = (item: T) => Promise<R>;

/** `run` answers a batch with one result per item, in order; if it throws, every item rejects. */
export function createBatcher<T, R>(
  run: (items: T[]) => Promise<R[]>,
  options: BatcherOptions,
): Batcher<T, R> {
  type Waiter = { item: T; resolve: (result: R) => void; reject: (error: unknown) => void };
  let open: Waiter[] | null = null;
  const queue: Waiter[][] = [];
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
      let batch = open;
      if (!batch) {
        batch = [];
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
