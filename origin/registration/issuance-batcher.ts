import type { Db } from "../db/client.ts";
import { type IssuePublicIdentityResult, issuePublicIdentities } from "./issuance.ts";

type Pending = {
  day: string;
  ipGroup: string;
  resolve: (result: IssuePublicIdentityResult) => void;
  reject: (error: unknown) => void;
};

/** Requests per issuance transaction at most: the statement sizes stay small. */
const MAX_BATCH = 64;

/**
 * Issues public identities one transaction at a time per node, each transaction taking every
 * request that arrived while the one before was out (up to MAX_BATCH, of one UTC day). A lone
 * request goes out at once; under load, requests share the registration lock and one commit
 * instead of queueing on the lock one by one (issuance.ts). Order is arrival order.
 */
export class IssuanceBatcher {
  private readonly db: Db;
  private readonly queue: Pending[] = [];
  private draining = false;

  constructor(db: Db) {
    this.db = db;
  }

  issue(request: { day: string; ipGroup: string }): Promise<IssuePublicIdentityResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...request, resolve, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    while (this.queue.length > 0) {
      const day = this.queue[0]!.day;
      const batch: Pending[] = [];
      for (let i = 0; i < this.queue.length && batch.length < MAX_BATCH; ) {
        if (this.queue[i]!.day === day) batch.push(...this.queue.splice(i, 1));
        else i++;
      }
      try {
        const results = await issuePublicIdentities(this.db, { day, requests: batch });
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
