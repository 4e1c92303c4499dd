/**
 * A clock for a test that must put the origin and the enclave (its own server, in the test's
 * process: money-stack.ts `enclaveNow`) at a UTC day's end: real time, moved by `set` and
 * `advance`. No process's clock can be moved there; this is the fake.
 */
import type { Clock } from "../origin/clock.ts";

export type MovableClock = Clock & { set(at: Date): void; advance(ms: number): void };

export function movableClock(): MovableClock {
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs),
    set: (at) => {
      offsetMs = at.getTime() - Date.now();
    },
    advance: (ms) => {
      offsetMs += ms;
    },
  };
}
