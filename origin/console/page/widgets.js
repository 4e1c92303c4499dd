// The console's widgets: elements built with textContent only (never parsed as HTML), tables that
// scroll inside their own box, definition lists, and the page's time and id formats. A classic
// script: it defines globalThis.ConsoleWidgets for the scripts loaded after it.

(() => {
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (name === "onclick") node.addEventListener("click", value);
      else node.setAttribute(name, value);
    }
    for (const child of children) {
      node.append(
        child instanceof Node ? child : document.createTextNode(child == null ? "—" : String(child)),
      );
    }
    return node;
  }

  // Each table scrolls sideways inside its own box (focusable, so a keyboard can scroll it too),
  // so on a phone a wide table (wallets, hashes) never widens the page itself.
  function table(headers, rows, empty, caption) {
    if (rows.length === 0) return el("p", { class: "muted" }, empty || "none");
    return el(
      "div",
      { class: "table-scroll", tabindex: "0", role: "region", "aria-label": caption || headers.join(", ") },
      el(
        "table",
        {},
        el("thead", {}, el("tr", {}, ...headers.map((header) => el("th", { scope: "col" }, header)))),
        el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((cell) => el("td", {}, cell))))),
      ),
    );
  }

  function definitions(target, entries) {
    target.replaceChildren(
      ...entries.flatMap(([term, value]) => [el("dt", {}, term), el("dd", { "data-key": term }, value)]),
    );
    return target;
  }

  const short = (value) =>
    typeof value === "string" && value.length > 20 ? `${value.slice(0, 10)}…${value.slice(-6)}` : value;
  const time = (value) => (value ? value.replace("T", " ").replace(/\.\d+Z$/, "Z") : null);

  /**
   * A paged list's loads, one at a time: `read(first)` asks for a page, `show(page, first)` adds it.
   * "Older" asked again while a page is on its way is that same load (two would read the same
   * cursor and show its rows twice); the first page asked again (the list reopened) supersedes an
   * older page still on its way, which is then not added.
   */
  function pageLoader(read, show) {
    let pending = null;
    let generation = 0;
    return (first) => {
      if (!first && pending) return pending;
      const mine = ++generation;
      const run = (async () => {
        try {
          const page = await read(first);
          if (mine === generation) await show(page, first);
        } finally {
          if (pending === run) pending = null;
        }
      })();
      pending = run;
      return run;
    };
  }

  globalThis.ConsoleWidgets = Object.freeze({ el, table, definitions, short, time, pageLoader });
})();
