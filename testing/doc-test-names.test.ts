// The docs show each behaviour by the test that attacks it, named `file › test name`
// (docs/security.md, docs/api.md, …). A name that no test carries any more shows nothing: a
// renamed or deleted test would leave the doc citing a proof that is gone. So every such citation in
// README.md and docs/ must name a file that exists and a test (or describe) title in it.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");

/** The ledger cites bench runs and their guards, not behaviours; its own rules apply there. */
const LEDGER = "docs/performance.md";

const pages = [
  "README.md",
  ...readdirSync(path.join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`)
    .filter((page) => page !== LEDGER),
];

type Citation = { page: string; file: string; name: string };

/**
 * The `file › name` code spans of a page; `… › name` repeats the file before it. Line breaks inside
 * a span are read as spaces, as Markdown renders them.
 */
function citationsOf(page: string, text: string): Citation[] {
  const flat = text.replace(/\s*\n\s*/g, " ");
  const citations: Citation[] = [];
  let lastFile: string | undefined;
  for (const match of flat.matchAll(/`([^`]+?) › ([^`]+)`/g)) {
    const [, fileOrEllipsis, name] = match;
    const file = fileOrEllipsis!.trim() === "…" ? lastFile : fileOrEllipsis!.trim();
    if (!file || !/\.test\.ts$/.test(file)) continue;
    lastFile = file;
    citations.push({ page, file, name: name!.trim() });
  }
  return citations;
}

/**
 * Every string literal of a test file, unescaped, without backticks, split at its placeholders
 * (`${…}` in a template, `%s` and `$name` in an `it.each` title): the fixed parts a title keeps.
 */
function titlePartsOf(source: string): string[][] {
  const parts: string[][] = [];
  // A title written over several lines as "…" + "…" is one title.
  const joined = source.replace(/(["'`])\s*\+\s*\1/g, "");
  for (const match of joined.matchAll(/"((?:\\.|[^"\\\n])*)"|'((?:\\.|[^'\\\n])*)'|`((?:\\.|[^`\\])*)`/g)) {
    const literal = (match[1] ?? match[2] ?? match[3] ?? "").replace(/\\(.)/g, "$1");
    if (literal.length < 8) continue;
    parts.push(
      literal.split(/\$\{[^}]*\}|%[sdifjo#%]|\$[A-Za-z_][\w.]*/).map((part) => part.replace(/\s+/g, " ")),
    );
  }
  return parts;
}

/**
 * Whether `cited` can be the start of a title made of `parts` (a citation may end with `…`, and
 * may leave out a code span's backticks): the fixed parts in order, anything where a placeholder is.
 */
function titleStartsWith(parts: string[], cited: string): boolean {
  const fixed = parts.map((part) => part.replaceAll("`", ""));
  const pieces = cited
    .replaceAll("`", "")
    .split("…")
    .map((piece) => piece.trim())
    .filter((piece) => piece !== "");
  if (pieces.length === 0) return false;
  const literally = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  // The title as a pattern: each fixed part literally, each placeholder anything; the cited text
  // may stop anywhere (its end inside a fixed part or a placeholder).
  const [first, ...rest] = pieces;
  const title = fixed.join("\u0000");
  if (fixed.length === 1) {
    if (!title.startsWith(first!)) return false;
  } else {
    // With placeholders: the fixed parts in order up to where the cited text stops, and most of the
    // cited text made of them, so that a literal such as `${base}/x402/demo` matches no title.
    let matched = false;
    for (let k = 0; k < fixed.length && !matched; k++) {
      const head = fixed.slice(0, k).map(literally).join("[\\s\\S]*?");
      const prefix = `^${head}${k > 0 ? "[\\s\\S]*?" : ""}`;
      const before = fixed.slice(0, k).reduce((sum, part) => sum + part.length, 0);
      const tail = fixed[k]!;
      for (let cut = tail.length; cut >= 0 && !matched; cut--) {
        if (before + cut < first!.length * 0.6) break;
        if (new RegExp(`${prefix}${literally(tail.slice(0, cut))}$`).test(first!)) matched = true;
      }
    }
    if (!matched) return false;
  }
  // Pieces after an inner `…`: somewhere further in the title.
  return rest.every((piece) => fixed.some((part) => part.includes(piece)) || title.includes(piece));
}

describe("the tests the docs name", () => {
  it("matches a title by its start, across placeholders and code spans", () => {
    expect(
      titleStartsWith(
        ["refuses a key whose address is not `from`, and a key of no sending purpose"],
        "refuses a key whose address is not from, and a key of no sending purpose",
      ),
    ).toBe(true);
    expect(
      titleStartsWith(
        ["answers 401 to a stream whose token was ", " after its authentication"],
        "answers 401 to a stream whose token was disabled after its authentication…",
      ),
    ).toBe(true);
    expect(
      titleStartsWith(["on a ", ": finds the agent by wallet"], "on a desktop: finds the agent by wallet"),
    ).toBe(true);
    expect(
      titleStartsWith(
        ["50 concurrent presentations of one PAYMENT-SIGNATURE: one settlement"],
        "50 concurrent retries with one PAYMENT-SIGNATURE…",
      ),
    ).toBe(false);
  });

  const citations = pages.flatMap((page) => citationsOf(page, readFileSync(path.join(root, page), "utf8")));

  it("finds the citations", () => {
    expect(citations.length).toBeGreaterThan(200);
  });

  it("every cited file exists and holds a test of the cited name", () => {
    const titles = new Map<string, string[][]>();
    const missing: string[] = [];
    for (const { page, file, name } of citations) {
      const full = path.join(root, file);
      if (!existsSync(full)) {
        missing.push(`${page}: ${file} does not exist (cited for "${name}")`);
        continue;
      }
      if (!titles.has(file)) titles.set(file, titlePartsOf(readFileSync(full, "utf8")));
      if (!titles.get(file)!.some((parts) => titleStartsWith(parts, name)))
        missing.push(`${page}: ${file} has no test named "${name}"`);
    }
    expect(missing).toEqual([]);
  });
});
