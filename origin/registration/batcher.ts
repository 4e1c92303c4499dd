type Pending<Request, Result> = {
  request: Request;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
};

export type BatcherOptions<Request, Result> = {
  /** Calls per batch at most: the statement sizes stay small. */
  maxBatch: number;
  /** Calls of one batch share this key (a day, a minute and its limits). */
  keyOf: (request: Request) => string;
  /** Runs one batch: one result per request, in the order given. */
  run: (requests: Request[]) => Promise<Result[]>;
};

/**
 * Coalesces concurrent calls into batches, one batch out at a time per batcher: each batch takes
 * every call that arrived while the one before was out (up to maxBatch, all of one key), in
 * arrival order. A lone call goes out at once; under load, calls share one statement or one
 * transaction instead of each paying its own round trips (in the origin's CPU and in Postgres's).
 * A batch that throws rejects each of its calls with the error.
 */
export class Batcher<Request, Result> {
  private readonly options: BatcherOptions<Request, Result>;
  private readonly queue: Pending<Request, Result>[] = [];
  private draining = false;

  constructor(options: BatcherOptions<Request, Result>) {
    this.options = options;
  }

  submit(request: Request): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    const { keyOf, maxBatch, run } = this.options;
    while (this.queue.length > 0) {
      const key = keyOf(this.queue[0]!.request);
      const batch: Pending<Request, Result>[] = [];
      const rest: Pending<Request, Result>[] = [];
      for (const pending of this.queue) {
        if (batch.length < maxBatch && keyOf(pending.request) === key) batch.push(pending);
        else rest.push(pending);
      }
      this.queue.splice(0, this.queue.length, ...rest);
      try {
        const results = await run(batch.map((pending) => pending.request));
        batch.forEach((pending, i) => {
          pending.resolve(results[i]!);
        });
      } catch (error) {
        for (const pending of batch) pending.reject(error);
      }
    }
    this.draining = false;
  }
}
