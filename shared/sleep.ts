/**
 * A promise that resolves after a delay. Runtime-neutral (Node, workerd, browsers): no `node:` imports.
 */

/**
 * Resolves after `ms` milliseconds; the timer keeps a Node process alive until it fires. With a
 * `signal`, resolves at once when it aborts (the caller checks it after the wait).
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal === undefined) return new Promise((resolve) => setTimeout(resolve, ms));
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
