/** Runs `npm start`'s launcher (dev/start.ts) with `env` until it exits, for tests of its refusals. */
import { freePort } from "./free-port.ts";
import { runTool } from "./run-tool.ts";

export async function runLauncherToExit(
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const { code, stdout, stderr } = await runTool("dev/start.ts", [], { env });
  return { code, output: `${stdout}${stderr}` };
}

/** The launcher's environment for a test: its data folder, each part on a free port, warnings only. */
export async function launcherEnv(dataDir: string) {
  return {
    START_DATA_DIR: dataDir,
    ORIGIN_PORT: String(await freePort()),
    DEVNET_PORT: String(await freePort()),
    EDGE_PORT: String(await freePort()),
    EMBEDDED_PG_PORT: String(await freePort()),
    LOG_LEVEL: "warn",
  };
}
