/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: every line
 * must be a HELP, a TYPE, or a sample of a declared family, or it throws naming the line.
 */
export type Sample = { name: string; labels: Record<string, string>; value: number };

export type Exposition = {
  types: Map<string, string>;
  samples: Sample[];
  /** The value of the sample with exactly these labels (undefined if absent). */
  value(name: string, labels?: Record<string, string>): number | undefined;
};

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: -?\\d+)?$`);
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

export function parsePrometheusText(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const lines = text.split("\n");
  if (lines.at(-1) !== "") throw new Error("the exposition must end with a newline");
  for (const line of lines.slice(0, -1)) {
    if (line === "") continue; // the format ignores empty lines (prom-client separates families)
    if (line.startsWith("# HELP ")) {
      if (!new RegExp(`^# HELP ${NAME} `).test(line)) throw new Error(`bad HELP line: ${line}`);
      continue;
    }
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(" ");
      if (!name || !new RegExp(`^${NAME}$`).test(name) || !type || !TYPES.has(type))
        throw new Error(`bad TYPE line: ${line}`);
      if (types.has(name)) throw new Error(`TYPE declared twice: ${name}`);
      types.set(name, type);
      continue;
    }
    if (line.startsWith("#")) throw new Error(`unexpected line: ${JSON.stringify(line)}`);
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`bad sample line: ${line}`);
    const [, name, labelText = "", valueText] = match;
    const family = familyOf(name!, types);
    if (!family) throw new Error(`sample of an undeclared family: ${line}`);
    const labels: Record<string, string> = {};
    let rest = labelText;
    while (rest !== "") {
      const label = LABEL.exec(rest);
      if (!label) throw new Error(`bad labels: ${line}`);
      labels[label[1]!] = label[2]!.replace(/\\n/g, "\n").replace(/\\(["\\])/g, "$1");
      rest = rest.slice(label[0].length);
    }
    const value = parseValue(valueText!);
    if (value === undefined) throw new Error(`bad value: ${line}`);
    samples.push({ name: name!, labels, value });
  }
  return {
    types,
    samples,
    value(name, labels = {}) {
      const wanted = JSON.stringify(Object.entries(labels).sort());
      return samples.find(
        (sample) => sample.name === name && JSON.stringify(Object.entries(sample.labels).sort()) === wanted,
      )?.value;
    },
  };
}

function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    const base = name.endsWith(suffix) ? name.slice(0, -suffix.length) : undefined;
    if (base && (types.get(base) === "histogram" || types.get(base) === "summary")) return base;
  }
  return undefined;
}

function parseValue(text: string): number | undefined {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  // prom-client writes `Nan` (the event loop's lag before its first sample, say); Prometheus reads
  // NaN in any case, as Go's ParseFloat does.
  if (text.toLowerCase() === "nan") return Number.NaN;
  return /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text) ? Number(text) : undefined;
}
