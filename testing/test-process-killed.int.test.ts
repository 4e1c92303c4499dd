import { spawn } from "node:child_process";
import { afterEach, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { REPO_ROOT } from "./enclave-process.ts";

// A test's process killed before its afterAll ran (its run killed, a Ctrl-C on npm test) leaves no
// enclave behind: the fixture gives the enclave an IPC channel, and the enclave stops when it
// closes (shared/node/parent-exit.ts). Before, a killed run's enclaves ran on as orphans beside the
// keys in their temporary folders, found after a run stopped by hand. The test's process here is a
// child that starts an enclave through the fixture, says its pid, and is SIGKILLed.

const STARTS_ENCLAVE = `
import { startEnclaveProcess } from "./testing/enclave-process.ts";
const enclave = await startEnclaveProcess({ envId: "killed-test" });
process.stdout.write(JSON.stringify({ enclave: enclave.pid() }) + "\\n");
setInterval(() => {}, 1_000);
`;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

let enclavePid: number | undefined;
afterEach(() => {
  if (enclavePid !== undefined && alive(enclavePid)) process.kill(enclavePid, "SIGKILL");
});

it("an enclave the fixture started stops once the test's process is killed before it stopped it", async () => {
  const test = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", STARTS_ENCLAVE], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let stdout = "";
  test.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  const deadline = Date.now() + 60_000;
  while (!stdout.includes("\n") && Date.now() < deadline) await sleep(50);
  enclavePid = (JSON.parse(stdout) as { enclave: number }).enclave;
  expect(alive(enclavePid)).toBe(true);

  const exited = new Promise((resolve) => test.once("exit", resolve));
  test.kill("SIGKILL");
  await exited;
  await expect.poll(() => alive(enclavePid!), { timeout: 20_000, interval: 100 }).toBe(false);
}, 90_000);
