import { readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "./enclave-process.ts";

/**
 * The Node version package.json's "engines" promises is one every installed package accepts, and
 * the README names that same version: a Node below a dependency's floor (the noble packages under
 * ethereumjs declare >= 20.19.0) may install and then fail, or be refused under engine-strict.
 */
describe("the Node version the project asks for", () => {
  it("is one every locked package's engines accept, and the README names it", async () => {
    const manifest = JSON.parse(await readFile(path.join(REPO_ROOT, "package.json"), "utf8")) as {
      engines: { node: string };
    };
    const floor = /^>=(\d+\.\d+\.\d+)$/.exec(manifest.engines.node)?.[1];
    expect(floor, `engines.node is a plain floor: ${manifest.engines.node}`).toBeDefined();
    const lock = JSON.parse(await readFile(path.join(REPO_ROOT, "package-lock.json"), "utf8")) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const refusing = Object.entries(lock.packages)
      .map(([name, entry]) => [name, Array.isArray(entry.engines) ? undefined : entry.engines?.node] as const)
      .filter(([, range]) => range !== undefined && !satisfies(floor!, range))
      .map(([name, range]) => `${name || "(the project)"} ${range}`);
    expect(refusing).toEqual([]);

    const readme = await readFile(path.join(REPO_ROOT, "README.md"), "utf8");
    const short = floor!.replace(/\.0$/, "");
    expect(readme).toContain(`Node ${short}`);
  });
});

type Version = [number, number, number];

/** Whether `version` is in `range`, for the forms the lock file's engines use (>=, >, ^, x-ranges). */
function satisfies(version: string, range: string): boolean {
  const have = parse(version);
  return range.split("||").some((alternative) =>
    alternative
      .trim()
      .replace(/([<>=^~]+)\s+/g, "$1")
      .split(/\s+/)
      .every((comparator) => meets(have, comparator)),
  );
}

function meets(have: Version, comparator: string): boolean {
  const [, operator = "", rest = ""] = /^([<>=^~]*)(.*)$/.exec(comparator) ?? [];
  const parts = rest
    .split(".")
    .filter((part) => /^\d+$/.test(part))
    .map(Number);
  const want = parse(parts.join("."));
  const order = compare(have, want);
  switch (operator) {
    case ">=":
      return order >= 0;
    case ">":
      return order > 0;
    case "<":
      return order < 0;
    case "^":
      return order >= 0 && have[0] === want[0];
    case "~":
      return order >= 0 && have[0] === want[0] && have[1] === want[1];
    default:
      // A bare, possibly partial version (20, 10.*, 20.19.0): every version it leaves open.
      return parts.every((part, i) => have[i] === part);
  }
}

function parse(text: string): Version {
  const [major = 0, minor = 0, patch = 0] = text.split(".").map(Number);
  return [major, minor, patch];
}

function compare(a: Version, b: Version): number {
  for (let i = 0; i < 3; i += 1) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}
