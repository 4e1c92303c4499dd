import childProcess from "node:child_process";
import { Miniflare } from "miniflare";
import { describe, expect, it } from "vitest";
import { withWorkerdV8Flags } from "./workerd-v8-flags.ts";

// The flags reach V8 in the workerd that Miniflare starts: `--expose-gc` is visible to a worker as
// a global `gc`, also among other flags (texts of several lengths in the appended segment).
const SCRIPT = `export default { fetch() { return new Response(typeof gc); } };`;

async function typeofGcWith(flags: readonly string[]): Promise<string> {
  const miniflare = await withWorkerdV8Flags(flags, async () => {
    const started = new Miniflare({ modules: true, script: SCRIPT, compatibilityDate: "2026-04-01" });
    await started.ready;
    return started;
  });
  try {
    return await (await miniflare.dispatchFetch("http://localhost/")).text();
  } finally {
    await miniflare.dispose();
  }
}

describe("withWorkerdV8Flags (real Miniflare)", () => {
  it("gives the flags to workerd, and only while Miniflare starts", async () => {
    const spawn = childProcess.spawn;
    expect(await typeofGcWith([])).toBe("undefined");
    expect(await typeofGcWith(["--expose-gc"])).toBe("function");
    expect(await typeofGcWith(["--max-semi-space-size=4", "--expose-gc", "--stack-trace-limit=12"])).toBe(
      "function",
    );
    expect(childProcess.spawn).toBe(spawn);
  });

  it("gives them to Miniflares started side by side", async () => {
    const spawn = childProcess.spawn;
    expect(await Promise.all([typeofGcWith(["--expose-gc"]), typeofGcWith(["--expose-gc"])])).toEqual([
      "function",
      "function",
    ]);
    expect(childProcess.spawn).toBe(spawn);
  });
});
