/**
 * The challenges of the console's WebAuthn ceremonies (registration, sign-in) still waiting for the
 * authenticator's answer, in this process's memory: the options and the answer go to the same
 * origin process. Each lives `ttlMs`, is spent once, and at most `max` wait at once (the oldest
 * dropped first), so ceremonies opened and never finished cannot grow the origin's memory.
 */
export class OpenCeremonies<T> {
  private readonly waiting = new Map<string, { value: T; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly max: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Opens a ceremony under its challenge, with what its answer must match. */
  open(challenge: string, value: T): void {
    this.prune();
    this.waiting.set(challenge, { value, until: this.now() + this.ttlMs });
  }

  /** What a challenge was opened with, while it is open and unexpired. */
  get(challenge: string): T | undefined {
    const ceremony = this.waiting.get(challenge);
    return ceremony && ceremony.until > this.now() ? ceremony.value : undefined;
  }

  /** Ends a ceremony: its challenge is never accepted again. */
  spend(challenge: string): void {
    this.waiting.delete(challenge);
  }

  private prune(): void {
    const at = this.now();
    for (const [challenge, ceremony] of this.waiting)
      if (ceremony.until <= at) this.waiting.delete(challenge);
    while (this.waiting.size >= this.max) this.waiting.delete(this.waiting.keys().next().value!);
  }
}
