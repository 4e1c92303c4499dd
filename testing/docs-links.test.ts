// The README and docs/ are what a clone has: every relative link must land on a file of the
// repository (and a heading of it, when it names one), and nothing may send a reader to documents
// outside the repository.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { markdownAnchors, PLAN_DOCUMENT_CITATION_IN_DOCS } from "./doc-citations.ts";

const root = path.resolve(import.meta.dirname, "..");
const pages = ["README.md", ...readdirSync(path.join(root, "docs")).map((name) => `docs/${name}`)].filter(
  (page) => page.endsWith(".md"),
);

function relativeLinks(markdown: string): string[] {
  const withoutCode = markdown.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  return [...withoutCode.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => match[1]!)
    .filter((target) => !/^[a-z]+:/.test(target));
}

describe("the README and docs/", () => {
  it.each(pages)("%s: every relative link lands on a file and heading of the repository", (page) => {
    const broken: string[] = [];
    for (const target of relativeLinks(readFileSync(path.join(root, page), "utf8"))) {
      const [file, anchor] = target.split("#");
      const resolved = file ? path.resolve(path.dirname(path.join(root, page)), file) : path.join(root, page);
      if (!resolved.startsWith(root) || !existsSync(resolved)) {
        broken.push(`${target}: no such file`);
      } else if (
        anchor &&
        resolved.endsWith(".md") &&
        !markdownAnchors(readFileSync(resolved, "utf8")).has(anchor)
      ) {
        broken.push(`${target}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
  });

  it.each(pages)("%s: names no document outside the repository", (page) => {
    const text = readFileSync(path.join(root, page), "utf8");
    expect(text).not.toMatch(PLAN_DOCUMENT_CITATION_IN_DOCS);
  });
});
