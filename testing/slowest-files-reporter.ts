/**
 * A vitest reporter that ends the run's output with its slowest test files (each file's tests and
 * hooks, as vitest times them; not its import). `.ci/run` uses it: a CI log is often read from its
 * end, where vitest's own per-file lines are those of the files that finished last, not the
 * longest, and the suite's time (docs/performance.md, "The test suite") is watched file by file.
 */
import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

/** How many files the list shows. */
const SHOWN = 15;

/** `seconds  path` lines for the `count` slowest modules, longest first. */
export function slowestModules(
  modules: ReadonlyArray<{ path: string; duration: number }>,
  count = SHOWN,
): string[] {
  return [...modules]
    .sort((a, b) => b.duration - a.duration)
    .slice(0, count)
    .map((module) => `${(module.duration / 1000).toFixed(1).padStart(7)} s  ${module.path}`);
}

export default class SlowestFilesReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const lines = slowestModules(
      testModules.map((module) => ({
        path: relative(process.cwd(), module.moduleId),
        duration: module.diagnostic().duration,
      })),
    );
    if (lines.length > 0) process.stdout.write(`\nslowest test files:\n${lines.join("\n")}\n`);
  }
}
