/**
 * The reference x402 stack's own process (bench/x402-reference.ts forks it): takes its parameters
 * over the fork's IPC channel, serves until it is killed, and says where it listens.
 */
import { errorMessage } from "../shared/error-message.ts";
import { type ReferenceReply, type ReferenceServerParams, serveReference } from "./x402-reference.ts";

const reply = (message: ReferenceReply): void => void process.send?.(message);

process.once("message", (params: ReferenceServerParams) => {
  serveReference(params).then(
    (server) => reply({ type: "ready", url: server.url }),
    (error: unknown) => {
      reply({ type: "failed", message: errorMessage(error) });
      process.exitCode = 1;
      process.disconnect?.();
    },
  );
});
// Its parent gone, it has nothing left to serve.
process.once("disconnect", () => process.exit());
