import { ConfigError } from "./config.ts";

/** sd_listen_fds(3): the first socket a supervisor hands over is descriptor 3. */
const FIRST_INHERITED_FD = 3;

/**
 * The listening socket a supervisor handed to this process (systemd socket activation:
 * `LISTEN_FDS`, `LISTEN_PID`), or undefined when none was. With one, a restart refuses and resets
 * nothing: the socket outlives the process, and connections made while no origin runs wait in
 * its queue for the next one. Bound by the origin itself, the port is closed for that moment, and
 * the kernel resets any connection it had completed but the origin had not yet accepted.
 *
 * As sd_listen_fds does, the variables count only when `LISTEN_PID` names this process: a child
 * that inherited them is not the one they were meant for.
 */
export function inheritedListenFd(env: Record<string, string | undefined>, pid: number): number | undefined {
  if (env.LISTEN_PID === undefined || env.LISTEN_FDS === undefined) return undefined;
  if (env.LISTEN_PID !== String(pid) || env.LISTEN_FDS === "0") return undefined;
  if (env.LISTEN_FDS !== "1") {
    throw new ConfigError([`LISTEN_FDS: the origin serves one socket; ${env.LISTEN_FDS} were handed over`]);
  }
  return FIRST_INHERITED_FD;
}
