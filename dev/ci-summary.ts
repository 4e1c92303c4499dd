/**
 * Prints one plain line, `N passed, N failed`, from a vitest JSON report, so a reader of the CI
 * log (human or program) sees the count without knowing vitest. A file that failed to load counts
 * as one failure: it ran no test, and it must not read as a pass.
 *
 *   node --import tsx dev/ci-summary.ts REPORT.json
 */
import { readFile } from "node:fs/promises";

type JsonReport = {
  success: boolean;
  numPassedTests: number;
  numFailedTests: number;
  testResults: Array<{ status: string; assertionResults: unknown[] }>;
};

/**
 * `passed` and `failed` of a report. Files that failed without a failed test count once each, and
 * a run vitest calls unsuccessful with nothing else failed (an unhandled error) counts as one.
 */
export function summarize(report: JsonReport): { passed: number; failed: number } {
  const unloaded = report.testResults.filter(
    (file) => file.status === "failed" && file.assertionResults.length === 0,
  ).length;
  const failed = report.numFailedTests + unloaded;
  return { passed: report.numPassedTests, failed: failed === 0 && !report.success ? 1 : failed };
}

async function main(): Promise<number> {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write("usage: node --import tsx dev/ci-summary.ts REPORT.json\n");
    return 2;
  }
  let report: JsonReport;
  try {
    report = JSON.parse(await readFile(file, "utf8")) as JsonReport;
  } catch {
    // vitest died before writing its report: nothing passed that anyone can vouch for.
    process.stderr.write(`ci-summary: no readable test report at ${file}\n`);
    process.stdout.write("0 passed, 1 failed\n");
    return 1;
  }
  const { passed, failed } = summarize(report);
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  return failed > 0 ? 1 : 0;
}

main().then((code) => process.exit(code));
