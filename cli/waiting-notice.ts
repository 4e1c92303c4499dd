import type { FetchLike } from "../client/request.ts";

/**
 * How long a request may go unanswered before the CLI says it is waiting. The gateway answers a
 * money request in well under a second; one held by an enclave that does not answer takes the
 * signer's timeout, and the client's retries after it, before the CLI can say anything else.
 */
export const WAITING_NOTICE_AFTER_MS = 2_000;

export type WaitingNoticeParams = {
  /** Where the line goes (stderr: stdout and the exit code stay the command's). */
  write: (text: string) => void;
  /**
   * What the agent may do about it: the retry advice of the command, without a full stop, read when
   * the line is due (a command's advice may change as it goes: `pay`'s, once it presented a payment).
   */
  advice?: string | (() => string | undefined);
  afterMs?: number;
};

/**
 * `fetchFn`, printing one line (once per command, whatever the number of requests, and once more
 * only when the advice has changed since) when a request has had no answer for `afterMs`: what it
 * waits for, and what the agent may do about it. The line names the method and the URL without its
 * query, never a header: the token stays unprinted.
 */
export function withWaitingNotice(fetchFn: FetchLike, params: WaitingNoticeParams): FetchLike {
  const afterMs = params.afterMs ?? WAITING_NOTICE_AFTER_MS;
  let toldAdvice: string | undefined;
  return async (input, init) => {
    // A read that asks the service to hold it until the action changes (`?wait=`, --wait) is meant
    // to go unanswered for a while: nothing to say about it.
    if (asksToBeHeld(input)) return fetchFn(input, init);
    const timer = setTimeout(() => {
      const advice = (typeof params.advice === "function" ? params.advice() : params.advice) ?? "";
      if (toldAdvice === advice) return;
      toldAdvice = advice;
      const seconds = Math.round(afterMs / 1000);
      params.write(
        `agent-wallet: no answer yet from ${describeRequest(input, init)} after ${seconds} s; still waiting${advice ? ` (${advice})` : ""}\n`,
      );
    }, afterMs);
    try {
      return await fetchFn(input, init);
    } finally {
      clearTimeout(timer);
    }
  };
}

function describeRequest(input: string | URL | Request, init: RequestInit | undefined): string {
  const url = new URL(input instanceof Request ? input.url : input.toString());
  const method = init?.method ?? (input instanceof Request ? input.method : "GET");
  return `${method.toUpperCase()} ${url.origin}${url.pathname}`;
}

function asksToBeHeld(input: string | URL | Request): boolean {
  const url = new URL(input instanceof Request ? input.url : input.toString());
  return /^[1-9]\d*$/.test(url.searchParams.get("wait") ?? "");
}
