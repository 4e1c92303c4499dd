/**
 * One lock for everything that touches EVM state: mining, eth_call, estimates and state reads.
 * The state manager is a single mutable trie with checkpoints, so two runs interleaving at an
 * `await` would see each other's half-applied changes; queueing them keeps each run atomic.
 */
export class Mutex {
  #tail: Promise<unknown> = Promise.resolve();

  /** Runs `task` after every task queued before it; a failing task does not block the queue. */
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}
