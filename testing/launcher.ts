/** Runs `npm start`'s launcher (dev/start.ts) with `env` until it exits, for tests of its refusals. */
import { runTool } from "./run-tool.ts";

export async function runLauncherToExit(
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const { code, stdout, stderr } = await runTool("dev/start.ts", [], { env });
  return { code, output: `${stdout}${stderr}` };
}
