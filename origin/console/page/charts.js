// The node at a glance, in charts: plain SVG built with DOM calls (createElementNS, textContent),
// no library, no inline style (colours are classes in console.css). Loaded before console.js, which
// calls ConsoleCharts.render(container, data) with the answer of GET {base}/admin/agents/overview/charts.
// Each chart is a <figure data-chart="…"> with a caption, an SVG with a <title> and axis labels, and
// a visually hidden table holding every value (each cell with data-bucket, data-series, data-value),
// which screen readers read and tests compare with the database.

(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 640;
  const HEIGHT = 200;
  const PAD = { left: 56, right: 12, top: 12, bottom: 40 };
  let ids = 0;

  function node(tag, attributes, ...children) {
    const made = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) made.setAttribute(name, value);
    for (const child of children) made.append(child instanceof Node ? child : String(child));
    return made;
  }

  function svgNode(tag, attributes, text) {
    const made = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) made.setAttribute(name, String(value));
    if (text !== undefined) made.textContent = text;
    return made;
  }

  const hhmm = (iso) => iso.slice(11, 16);

  // 6-decimal units as a decimal string: money is never a float here, even for display.
  function coins(units) {
    const padded = units.padStart(7, "0");
    const whole = padded.slice(0, -6);
    const fraction = padded.slice(-6).replace(/0+$/, "");
    return fraction ? `${whole}.${fraction}` : whole;
  }

  // A figure: caption, an SVG described by its <title>, and the hidden table of its values.
  function figure(name, title, description, rows, columns) {
    const id = `chart-${name}-${++ids}`;
    const svg = svgNode("svg", {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      class: "chart-svg",
      role: "img",
      "aria-labelledby": `${id}-title ${id}-desc`,
    });
    svg.append(
      svgNode("title", { id: `${id}-title` }, title),
      svgNode("desc", { id: `${id}-desc` }, description),
    );
    const table = node(
      "table",
      {},
      node("caption", {}, title),
      node("thead", {}, node("tr", {}, ...columns.map((column) => node("th", { scope: "col" }, column)))),
      node(
        "tbody",
        {},
        ...rows.map((row) =>
          node(
            "tr",
            {},
            node("th", { scope: "row" }, row.label),
            ...row.cells.map((cell) =>
              node(
                "td",
                { "data-bucket": row.bucket, "data-series": cell.series, "data-value": cell.value },
                cell.text ?? cell.value,
              ),
            ),
          ),
        ),
      ),
    );
    const box = node(
      "figure",
      { class: "chart", "data-chart": name },
      node("figcaption", {}, title),
      svg,
      // A table is as wide as its content whatever its own width: the hidden box around it clips it.
      node("div", { class: "visually-hidden" }, table),
    );
    return { box, svg };
  }

  function axes(svg, xLabel, yLabel, max) {
    const bottom = HEIGHT - PAD.bottom;
    svg.append(
      svgNode("line", { class: "axis", x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: bottom }),
      svgNode("line", { class: "axis", x1: PAD.left, y1: bottom, x2: WIDTH - PAD.right, y2: bottom }),
      svgNode(
        "text",
        { class: "axis-label", x: (PAD.left + WIDTH) / 2, y: HEIGHT - 4, "text-anchor": "middle" },
        xLabel,
      ),
      svgNode(
        "text",
        {
          class: "axis-label",
          x: 12,
          y: (PAD.top + bottom) / 2,
          "text-anchor": "middle",
          transform: `rotate(-90 12 ${(PAD.top + bottom) / 2})`,
        },
        yLabel,
      ),
      svgNode("text", { class: "tick", x: PAD.left - 4, y: PAD.top + 8, "text-anchor": "end" }, String(max)),
      svgNode("text", { class: "tick", x: PAD.left - 4, y: bottom, "text-anchor": "end" }, "0"),
    );
  }

  // Stacked vertical bars, one per bucket; `series` fixes the stacking order and the colours.
  function stackedBars(svg, buckets, series, xLabel, yLabel) {
    const max = Math.max(
      1,
      ...buckets.map((bucket) => bucket.parts.reduce((sum, part) => sum + part.value, 0)),
    );
    axes(svg, xLabel, yLabel, max);
    const plotWidth = WIDTH - PAD.left - PAD.right;
    const plotHeight = HEIGHT - PAD.top - PAD.bottom;
    const step = plotWidth / buckets.length;
    buckets.forEach((bucket, i) => {
      let y = HEIGHT - PAD.bottom;
      for (const part of bucket.parts) {
        if (part.value === 0) continue;
        const height = (part.value / max) * plotHeight;
        y -= height;
        const rect = svgNode("rect", {
          class: `mark series-${series.indexOf(part.series) % 8}`,
          x: PAD.left + i * step + 1,
          y,
          width: Math.max(1, step - 2),
          height,
          "data-bucket": bucket.start,
          "data-series": part.series,
          "data-value": part.value,
        });
        rect.append(svgNode("title", {}, `${bucket.label} ${part.series}: ${part.value}`));
        svg.append(rect);
      }
      if (i % Math.ceil(buckets.length / 6) === 0) {
        svg.append(
          svgNode(
            "text",
            { class: "tick", x: PAD.left + i * step, y: HEIGHT - PAD.bottom + 14 },
            bucket.label,
          ),
        );
      }
    });
  }

  // The colours' names, beside the chart (the same classes as the marks).
  function legend(series) {
    return node(
      "ul",
      { class: "legend" },
      ...series.map((name, i) => {
        const swatch = svgNode("svg", { width: 10, height: 10, "aria-hidden": "true" });
        swatch.append(svgNode("rect", { class: `series-${i % 8}`, width: 10, height: 10 }));
        return node("li", {}, swatch, ` ${name}`);
      }),
    );
  }

  // Horizontal bars, one per row, with an optional marker (a floor, a reserve) drawn as a line.
  function horizontalBars(svg, rows, xLabel, yLabel) {
    const max = Math.max(1, ...rows.map((row) => Math.max(row.length, row.marker ?? 0)));
    axes(svg, xLabel, yLabel, "");
    const plotWidth = WIDTH - PAD.left - PAD.right;
    const step = (HEIGHT - PAD.top - PAD.bottom) / Math.max(1, rows.length);
    rows.forEach((row, i) => {
      const y = PAD.top + i * step;
      const rect = svgNode("rect", {
        class: `mark series-${i % 8}${row.alarm ? " alarm" : ""}`,
        x: PAD.left,
        y: y + step * 0.2,
        width: Math.max(row.length > 0 ? 1 : 0, (row.length / max) * plotWidth),
        height: step * 0.6,
        "data-series": row.series,
        "data-value": row.value,
      });
      rect.append(svgNode("title", {}, `${row.label}: ${row.text}`));
      svg.append(
        rect,
        svgNode(
          "text",
          { class: "bar-label", x: PAD.left + 4, y: y + step * 0.55 },
          `${row.label}: ${row.text}`,
        ),
      );
      if (row.marker !== undefined) {
        const x = PAD.left + (row.marker / max) * plotWidth;
        svg.append(
          svgNode("line", { class: "marker", x1: x, x2: x, y1: y + step * 0.1, y2: y + step * 0.9 }),
        );
      }
    });
  }

  function registrations(data) {
    const reasons = [...new Set(data.buckets.flatMap((bucket) => Object.keys(bucket.refused)))].sort();
    const series = ["issued", ...reasons.map((reason) => `refused:${reason}`)];
    const buckets = data.buckets.map((bucket) => ({
      start: bucket.start,
      label: hhmm(bucket.start),
      parts: [
        { series: "issued", value: bucket.issued },
        ...reasons.map((reason) => ({ series: `refused:${reason}`, value: bucket.refused[reason] ?? 0 })),
      ],
    }));
    const { box, svg } = figure(
      "registrations",
      "Registrations issued and refused per hour, by reason",
      `Each bar is one UTC hour from ${data.from} to ${data.to}: identities issued (every node), then this node's refusals by reason (counted since ${data.refusals_since}).`,
      buckets.map((bucket) => ({
        bucket: bucket.start,
        label: bucket.label,
        cells: bucket.parts.map((part) => ({ series: part.series, value: part.value })),
      })),
      ["hour (UTC)", ...series],
    );
    stackedBars(svg, buckets, series, "hour (UTC)", "registrations");
    box.append(legend(series));
    return box;
  }

  function actions(data) {
    const series = [
      ...new Set(data.buckets.flatMap((bucket) => bucket.counts.map((c) => `${c.kind}/${c.state}`))),
    ].sort();
    const buckets = data.buckets.map((bucket) => ({
      start: bucket.start,
      label: hhmm(bucket.start),
      parts: series.map((name) => ({
        series: name,
        value: bucket.counts.find((c) => `${c.kind}/${c.state}` === name)?.count ?? 0,
      })),
    }));
    const { box, svg } = figure(
      "actions",
      "Actions per minute, by kind and state",
      `Each bar is one UTC minute from ${data.from} to ${data.to}: the actions created in it, stacked by kind and their state now.`,
      buckets
        .filter((bucket) => bucket.parts.some((part) => part.value > 0))
        .map((bucket) => ({
          bucket: bucket.start,
          label: bucket.label,
          cells: bucket.parts.map((part) => ({ series: part.series, value: part.value })),
        })),
      ["minute (UTC)", ...series],
    );
    stackedBars(svg, buckets, series, "minute (UTC)", "actions");
    box.append(legend(series));
    return box;
  }

  function confirmation(data) {
    const rows = [];
    for (const [kind, figures] of [
      ["transfers", data.transfers],
      ["settlements", data.settlements],
    ]) {
      for (const quantile of ["p50", "p99"]) {
        const value = figures[`${quantile}_ms`];
        rows.push({
          label: `${kind} ${quantile}`,
          series: `${kind}:${quantile}`,
          value: value ?? "",
          length: value ?? 0,
          text: value === null ? "none confirmed" : `${value} ms (of ${figures.count})`,
        });
      }
    }
    const { box, svg } = figure(
      "confirmation",
      "Time to confirmation (p50, p99)",
      `From creation to confirmation, in milliseconds, for the transfers and settlements confirmed from ${data.from} to ${data.to}.`,
      rows.map((row) => ({
        bucket: "",
        label: row.label,
        cells: [{ series: row.series, value: row.value, text: row.text }],
      })),
      ["", "milliseconds"],
    );
    horizontalBars(svg, rows, "milliseconds", "");
    return box;
  }

  function keyStock(data) {
    const row = {
      label: "free keys",
      series: "free",
      value: data.free,
      length: data.free,
      marker: data.reserve,
      alarm: data.free <= data.reserve,
      text: `${data.free} (reserve ${data.reserve})`,
    };
    const { box, svg } = figure(
      "key-stock",
      "Free keys against the reserve",
      "Verified free keys now; the line is the reserve registration keeps.",
      [
        {
          bucket: "",
          label: "now",
          cells: [
            { series: "free", value: data.free },
            { series: "reserve", value: data.reserve },
          ],
        },
      ],
      ["", "free", "reserve"],
    );
    horizontalBars(svg, [row], "keys", "");
    return box;
  }

  function findings(data) {
    const rows = data.by_class.map((row) => ({
      label: row.class,
      series: row.class,
      value: row.count,
      length: row.count,
      text: String(row.count),
    }));
    const { box, svg } = figure(
      "findings",
      "Identity findings by class",
      `Findings the identity sweep recorded from ${data.from} to ${data.to}, by class.`,
      rows.map((row) => ({
        bucket: "",
        label: row.label,
        cells: [{ series: row.series, value: row.value }],
      })),
      ["class", "findings"],
    );
    if (rows.length === 0)
      svg.append(svgNode("text", { class: "bar-label", x: PAD.left + 4, y: 40 }, "no finding"));
    else horizontalBars(svg, rows, "findings", "");
    return box;
  }

  function balances(data) {
    // Bar lengths are drawing, not money: a ratio of the two bigints, to three decimals.
    const top = data.reduce((max, row) => {
      const each = [BigInt(row.floor_units), BigInt(row.balance_units ?? "0")];
      return each.reduce((a, b) => (b > a ? b : a), max);
    }, 1n);
    const scale = (units) => Number((BigInt(units) * 1000n) / top) / 1000;
    const rows = data.map((row) => ({
      label: row.wallet,
      series: row.wallet,
      value: row.balance_units ?? "",
      length: row.balance_units === null ? 0 : scale(row.balance_units),
      marker: scale(row.floor_units),
      alarm: row.below_floor === true,
      text:
        row.balance_units === null
          ? `unknown (${row.unknown_reason}); floor ${coins(row.floor_units)}`
          : `${coins(row.balance_units)}${row.below_floor ? " — below" : ""} (floor ${coins(row.floor_units)})`,
    }));
    const { box, svg } = figure(
      "balances",
      "The settler's and the treasury's balances against their floors",
      "Each wallet's balance read from the chain now, in coins; the line is its configured floor.",
      data.map((row) => ({
        bucket: "",
        label: row.wallet,
        cells: [
          {
            series: `${row.wallet}:balance_units`,
            value: row.balance_units ?? "",
            text: row.balance_units ?? row.unknown_reason,
          },
          { series: `${row.wallet}:floor_units`, value: row.floor_units },
        ],
      })),
      ["wallet", "balance (units)", "floor (units)"],
    );
    horizontalBars(svg, rows, "balance against floor", "");
    return box;
  }

  function render(container, data) {
    container.replaceChildren(
      node("p", { class: "chart-note" }, `as of ${data.generated_at}`),
      node(
        "div",
        { class: "charts" },
        registrations(data.registrations),
        actions(data.actions),
        confirmation(data.time_to_confirmation),
        keyStock(data.key_stock),
        findings(data.findings),
        balances(data.balances),
      ),
    );
  }

  globalThis.ConsoleCharts = { render };
})();
