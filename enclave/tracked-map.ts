/**
 * The maps of the sealed state that grow with the keys active in a day (state-changes.ts) are
 * written as changes: only the entries a group of commits touched. Rather than have every op report
 * what it changed, a TrackedMap notes, while a commit's change runs (`recordingChanges`), every key
 * that change could have touched: each key it set, deleted or read (a value read may be an object
 * then changed in place), and every key it iterated over. That errs towards writing more, never
 * towards losing a change, as long as the change reaches its values through the map.
 */

let recording = false;

/** Runs `change` (synchronous: a commit's change has no await) with the maps noting what it touches. */
export function recordingChanges(change: () => void): void {
  recording = true;
  try {
    change();
  } finally {
    recording = false;
  }
}

export type MapChanges<K> = {
  /** The map was emptied since the last take: its entries before are gone. */
  cleared: boolean;
  /** Keys that may have changed since the last take (present: set or changed in place; absent: deleted). */
  touched: Set<K>;
};

export class TrackedMap<K, V> extends Map<K, V> {
  #touched = new Set<K>();
  #cleared = false;

  static of<K, V>(entries: Iterable<readonly [K, V]>): TrackedMap<K, V> {
    const map = new TrackedMap<K, V>();
    for (const [key, value] of entries) map.set(key, value);
    return map;
  }

  /** What changed since the last take; the next take starts from nothing. */
  takeChanges(): MapChanges<K> {
    const changes = { cleared: this.#cleared, touched: this.#touched };
    this.#touched = new Set();
    this.#cleared = false;
    return changes;
  }

  override get(key: K): V | undefined {
    if (recording) this.#touched.add(key);
    return super.get(key);
  }

  override set(key: K, value: V): this {
    if (recording) this.#touched.add(key);
    return super.set(key, value);
  }

  override delete(key: K): boolean {
    if (recording) this.#touched.add(key);
    return super.delete(key);
  }

  override clear(): void {
    this.#cleared = true;
    this.#touched.clear();
    super.clear();
  }

  override forEach(callback: (value: V, key: K, map: Map<K, V>) => void, thisArg?: unknown): void {
    this.#touchAll();
    super.forEach(callback, thisArg);
  }

  override entries(): MapIterator<[K, V]> {
    this.#touchAll();
    return super.entries();
  }

  override values(): MapIterator<V> {
    this.#touchAll();
    return super.values();
  }

  override [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  /** An iteration hands out every value: any of them may be changed in place. */
  #touchAll(): void {
    if (!recording) return;
    for (const key of super.keys()) this.#touched.add(key);
  }
}
