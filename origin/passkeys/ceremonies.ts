/**
 * The challenges of the console's WebAuthn ceremonies (registration, sign-in) still waiting for the
 * authenticator's answer, in this process's memory: the options and the answer go to the same
 * origin process. Each lives `ttlMs` and is spent once. At most `max` wait at once, and at most
 * `perClient` of one client: a client opening more loses its own oldest, and when all `max` are
 * taken the oldest of the client holding the most is dropped. So ceremonies opened and never
 * finished cannot grow the origin's memory, and a few clients opening all they may cannot crowd
 * out another client's one ceremony (docs/operations.md#signing-in-with-a-passkey).
 */
export class OpenCeremonies<T> {
  /** In the order opened, so the first of a client's is its oldest. */
  private readonly waiting = new Map<string, { value: T; until: number; client: string }>();
  private readonly heldBy = new Map<string, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly max: number,
    private readonly perClient: number = max,
    private readonly now: () => number = Date.now,
  ) {}

  /** Opens a ceremony under its challenge, with what its answer must match, for `client`. */
  open(challenge: string, value: T, client = ""): void {
    this.prune();
    if ((this.heldBy.get(client) ?? 0) >= this.perClient) this.dropOldestOf(client);
    if (this.waiting.size >= this.max) this.dropOldestOf(this.busiestClient());
    this.waiting.set(challenge, { value, until: this.now() + this.ttlMs, client });
    this.heldBy.set(client, (this.heldBy.get(client) ?? 0) + 1);
  }

  /** What a challenge was opened with, while it is open and unexpired. */
  get(challenge: string): T | undefined {
    const ceremony = this.waiting.get(challenge);
    return ceremony && ceremony.until > this.now() ? ceremony.value : undefined;
  }

  /** Ends a ceremony: its challenge is never accepted again. */
  spend(challenge: string): void {
    const ceremony = this.waiting.get(challenge);
    if (ceremony === undefined) return;
    this.waiting.delete(challenge);
    const held = (this.heldBy.get(ceremony.client) ?? 1) - 1;
    if (held > 0) this.heldBy.set(ceremony.client, held);
    else this.heldBy.delete(ceremony.client);
  }

  private prune(): void {
    const at = this.now();
    for (const [challenge, ceremony] of this.waiting) if (ceremony.until <= at) this.spend(challenge);
  }

  private busiestClient(): string {
    let busiest = "";
    let most = 0;
    for (const [client, held] of this.heldBy)
      if (held > most) {
        busiest = client;
        most = held;
      }
    return busiest;
  }

  private dropOldestOf(client: string): void {
    for (const [challenge, ceremony] of this.waiting)
      if (ceremony.client === client) {
        this.spend(challenge);
        return;
      }
  }
}
