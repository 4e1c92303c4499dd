/**
 * What the docs tests need to tell a citation a clone can follow from one it cannot: the anchors a
 * Markdown page offers on GitHub, the `docs/<page>.md#<anchor>` citations in a source file, and the
 * words that name the plan documents the service was built from, which a clone does not contain.
 * This file names those words to find them, so the scan of source files passes over it for them.
 */

/** Citations of the plan documents: their names as comments used to cite them. */
export const PLAN_DOCUMENT_CITATION = /\bSPEC\b|\bDESIGN\b|\bissue \d+ item \d+/;

/** The same in the docs, and the relative path that leads out of a clone to where they lie. */
export const PLAN_DOCUMENT_CITATION_IN_DOCS = /\bSPEC\b|\bDESIGN\b|\bissue \d+ item \d+|\.\.\/shared/;

/**
 * The slug GitHub gives a heading (github-slugger's rule): its text as rendered (code spans,
 * links and emphasis reduced to their words, HTML tags dropped), lower-cased, every character but
 * letters, marks, digits, `_`, `-` and spaces dropped, each space a hyphen.
 */
export function headingSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]*>/g, "")
    .trim();
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/**
 * Every anchor of a page: each ATX heading's slug (a repeated slug gets `-1`, `-2`, … as on
 * GitHub), and each explicit `<a id="…">` or `<a name="…">`. Lines inside fenced code are not
 * headings. Setext headings (text underlined with `===`) are not read: the docs do not use them.
 */
export function markdownAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const occurrences = new Map<string, number>();
  let fence: string | undefined;
  for (const line of markdown.split("\n")) {
    const fenceMark = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fenceMark && (!fence || (fenceMark[0] === fence[0] && fenceMark.length >= fence.length))) {
      fence = fence ? undefined : fenceMark;
      continue;
    }
    if (fence) continue;
    for (const match of line.matchAll(/<a\s[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']/gi))
      anchors.add(match[1]!);
    const heading = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (!heading) continue;
    const base = headingSlug(heading[1]!);
    let slug = base;
    while (occurrences.has(slug)) {
      const n = (occurrences.get(base) ?? 0) + 1;
      occurrences.set(base, n);
      slug = `${base}-${n}`;
    }
    occurrences.set(slug, 0);
    anchors.add(slug);
  }
  return anchors;
}

export type DocCitation = { line: number; page: string; anchor: string | undefined };

/**
 * Every `docs/<page>.md` a text names, with the anchor after `#` if any, by line (1-based). A path
 * that merely ends in docs/ (`edge-worker/docs/x.md`) is not one.
 */
export function docCitations(text: string): DocCitation[] {
  const citations: DocCitation[] = [];
  text.split("\n").forEach((content, index) => {
    for (const match of content.matchAll(/(?<![\w./-])docs\/([\w.-]+\.md)(?:#([\p{L}\p{M}\p{N}_-]+))?/gu)) {
      citations.push({ line: index + 1, page: match[1]!, anchor: match[2] });
    }
  });
  return citations;
}
