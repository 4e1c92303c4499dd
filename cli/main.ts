import { runCli } from "./run.ts";

// A reader that stops reading (`agent-wallet watch | head -3`) ends the command as it ends `ls`:
// quietly, with the command's code (watch's is 0), never an unhandled EPIPE and its stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(typeof process.exitCode === "number" ? process.exitCode : 0);
});

process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  readStdin: async () => {
    let text = "";
    for await (const chunk of process.stdin) text += chunk;
    return text;
  },
  onStopped: (said) => {
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      process.once(signal, () => {
        process.stderr.write(said());
        // Then ended by the signal, as without this listener: the shell or harness sees it so.
        process.kill(process.pid, signal);
      });
    }
  },
  stopSignal: () => {
    const stop = new AbortController();
    for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => stop.abort());
    return stop.signal;
  },
});
