// Comments cite what a clone contains: a heading of a page in docs/, in the repository's own words
// (docs/development.md#comments-cite-the-docs). So every `docs/<page>.md#<anchor>`
// a source file names must land on a heading (or an explicit <a id>) of that page, and no source
// file may cite the plan documents the service was built from, which a clone does not have.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { docCitations, headingSlug, markdownAnchors, PLAN_DOCUMENT_CITATION } from "./doc-citations.ts";

const root = path.resolve(import.meta.dirname, "..");

/** Folders of no source of ours: dependencies, build output, local data, tool caches. */
const NOT_SOURCE = new Set([
  "node_modules",
  "dist",
  ".data",
  ".git",
  ".wrangler",
  ".test-probes",
  ".test-artifacts",
  "coverage",
]);
const SOURCE_FILE = /\.(ts|mts|cts|tsx|js|mjs|cjs)$/;
/** It spells out the words it looks for. */
const NAMES_THE_WORDS = "testing/doc-citations.ts";

function sourceFiles(dir = ""): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const relative = dir ? `${dir}/${entry.name}` : entry.name;
    if (entry.isDirectory() && !NOT_SOURCE.has(entry.name)) files.push(...sourceFiles(relative));
    else if (entry.isFile() && SOURCE_FILE.test(entry.name)) files.push(relative);
  }
  return files;
}

const files = sourceFiles().map((file) => ({ file, text: readFileSync(path.join(root, file), "utf8") }));
const anchorsByPage = new Map<string, Set<string> | undefined>();
function anchorsOf(page: string): Set<string> | undefined {
  if (!anchorsByPage.has(page)) {
    const full = path.join(root, "docs", page);
    anchorsByPage.set(page, existsSync(full) ? markdownAnchors(readFileSync(full, "utf8")) : undefined);
  }
  return anchorsByPage.get(page);
}

/** Each line of a source file citing the plan documents, as `file:line: text`. */
const planCitations = files
  .filter(({ file }) => file !== NAMES_THE_WORDS)
  .flatMap(({ file, text }) =>
    text
      .split("\n")
      .flatMap((content, index) =>
        PLAN_DOCUMENT_CITATION.test(content) ? [{ file, at: `${file}:${index + 1}: ${content.trim()}` }] : [],
      ),
  );
describe("GitHub heading anchors", () => {
  it.each([
    ["Faucet and transfer actions: states", "faucet-and-transfer-actions-states"],
    [
      "The demo's paid retry: when `PAYMENT-RESPONSE` is sent",
      "the-demos-paid-retry-when-payment-response-is-sent",
    ],
    ["After settlement_pending, retry the same payment", "after-settlement_pending-retry-the-same-payment"],
    [
      "Moving money: `POST /agent/v1/transfers` and `/faucet`",
      "moving-money-post-agentv1transfers-and-faucet",
    ],
    ["A cheap token (public registration, or read only)", "a-cheap-token-public-registration-or-read-only"],
    ["Keys in [the enclave](enclave.md) — sealed", "keys-in-the-enclave--sealed"],
  ])("%s → #%s", (heading, slug) => {
    expect(headingSlug(heading)).toBe(slug);
  });

  it("numbers repeated headings, reads explicit anchors, and skips fenced code", () => {
    const page = [
      "# Limits",
      "## Limits",
      "### Limits ##",
      "```sh",
      "# not a heading",
      "```",
      'Text with <a id="kept-anchor"></a> in it.',
    ].join("\n");
    expect([...markdownAnchors(page)].sort()).toEqual(["kept-anchor", "limits", "limits-1", "limits-2"]);
  });

  it("finds docs/ citations with and without an anchor, not paths that only end in docs/", () => {
    const text = "// docs/api.md#conventions and docs/x402.md.\n// edge-worker/docs/x.md#y";
    expect(docCitations(text)).toEqual([
      { line: 1, page: "api.md", anchor: "conventions" },
      { line: 1, page: "x402.md", anchor: undefined },
    ]);
  });
});

describe("citations in source files", () => {
  it("every docs/ page and heading a source file cites exists", () => {
    const broken: string[] = [];
    for (const { file, text } of files) {
      for (const { line, page, anchor } of docCitations(text)) {
        const anchors = anchorsOf(page);
        const cited = `docs/${page}${anchor ? `#${anchor}` : ""}`;
        if (!anchors) broken.push(`${file}:${line}: ${cited}: no such page`);
        else if (anchor && !anchors.has(anchor)) broken.push(`${file}:${line}: ${cited}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("no source file cites the plan documents the service was built from: cite a docs/ anchor instead", () => {
    expect(planCitations.map(({ at }) => at)).toEqual([]);
  });
});
