/** Runs `npm start`'s launcher (dev/start.ts) with `env` until it exits, for tests of its refusals. */
import { spawn } from "node:child_process";

export async function runLauncherToExit(
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const launcher = spawn(process.execPath, ["--import", "tsx", "dev/start.ts"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  for (const stream of [launcher.stdout, launcher.stderr]) {
    stream.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
  }
  const code = await new Promise<number | null>((resolve) => launcher.once("exit", resolve));
  return { code, output };
}
