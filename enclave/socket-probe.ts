import { connect } from "node:net";

/** True if something accepts connections on the Unix socket at `socketPath` right now. */
export function socketAccepts(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(socketPath);
    probe.once("connect", () => {
      probe.destroy();
      resolve(true);
    });
    probe.once("error", () => resolve(false));
  });
}
