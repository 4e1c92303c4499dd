/**
 * How long the MCP server lets a tool call run, fitted inside its host's request timeout
 * (AGENT_MCP_HOST_TIMEOUT_SECONDS, docs/agents.md). A call still running when the host gives up
 * ends with no result: the agent never learns the idempotency key a transfer went out under, nor
 * the status a wait saw. So every call answers before the host's timeout, by margins that leave
 * the answer time to travel.
 */

/** The official MCP client's default request timeout (DEFAULT_REQUEST_TIMEOUT_MSEC), in seconds. */
export const DEFAULT_HOST_TIMEOUT_SECONDS = 60;
/** The shortest host timeout the server fits in: a wait until an action ends still gets 5 s. */
export const MIN_HOST_TIMEOUT_SECONDS = 20;
export const MAX_HOST_TIMEOUT_SECONDS = 3_600;
/** The most `?wait=` holds a read (docs/events.md#waiting-for-an-action). */
const GATEWAY_MAX_WAIT_SECONDS = 30;

export type ToolCallTimings = {
  /** The longest a tool call waits for the gateway, its retries included. */
  deadlineMs: number;
  /** How long `wait: true` follows an action before it answers that it has not ended. */
  waitUntilEndedMs: number;
  /** The most seconds a numeric `wait` may ask for. */
  maxWaitSeconds: number;
};

/** The timings for a host that gives up on a request after `hostTimeoutSeconds`. */
export function toolCallTimings(hostTimeoutSeconds: number): ToolCallTimings {
  const deadlineSeconds = hostTimeoutSeconds - 10;
  const waitUntilEndedSeconds = deadlineSeconds - 5;
  return {
    deadlineMs: deadlineSeconds * 1000,
    waitUntilEndedMs: waitUntilEndedSeconds * 1000,
    maxWaitSeconds: Math.min(GATEWAY_MAX_WAIT_SECONDS, waitUntilEndedSeconds),
  };
}

/** AGENT_MCP_HOST_TIMEOUT_SECONDS as a number of seconds, or the reason it is refused. */
export function parseHostTimeout(value: string | undefined): { seconds: number } | { refused: string } {
  if (value === undefined || value === "") return { seconds: DEFAULT_HOST_TIMEOUT_SECONDS };
  const seconds = /^\d{1,5}$/.test(value) ? Number(value) : Number.NaN;
  if (!(seconds >= MIN_HOST_TIMEOUT_SECONDS && seconds <= MAX_HOST_TIMEOUT_SECONDS)) {
    return {
      refused: `AGENT_MCP_HOST_TIMEOUT_SECONDS must be whole seconds from ${MIN_HOST_TIMEOUT_SECONDS} to ${MAX_HOST_TIMEOUT_SECONDS} (the host's request timeout; ${DEFAULT_HOST_TIMEOUT_SECONDS} when unset), not ${JSON.stringify(value)}`,
    };
  }
  return { seconds };
}
