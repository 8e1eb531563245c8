// Message-size histogram: point-to-point messages by size bin (bin 0 holds
// empty messages, bin i sizes 2^(i-1) up to 2^i - 1), drawn as plain bars
// with their counts, for the job or one rank.
import { h } from "../dom";
import * as fmt from "../format";

const BIN_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 1024 → "1 KiB". */
export function binSize(n: number): string {
  let i = 0;
  while (n >= 1024 && i < BIN_UNITS.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n} ${BIN_UNITS[i]}`;
}

export function histogramBars(counts: number[], mins: number[], emptyText: string): HTMLElement {
  let last = -1;
  let first = -1;
  for (let i = 0; i < counts.length; i++) {
    if (counts[i]! > 0) {
      last = i;
      if (first < 0) first = i;
    }
  }
  if (last < 0) return h("div", { class: "state empty histo-empty" }, emptyText);
  // Show a little context around the used bins.
  const lo = Math.max(0, first - 2);
  const hi = Math.min(Math.max(counts.length, last + 3), last + 3);
  const max = Math.max(...counts);
  const total = counts.reduce((a, b) => a + b, 0);
  const bars: HTMLElement[] = [];
  for (let i = lo; i < hi; i++) {
    const c = counts[i] ?? 0;
    const label = i === 0 ? "0" : binSize(mins[i] ?? 2 ** (i - 1)).replace(" B", "").replace(" ", "");
    const title = `${i === 0 ? "empty messages" : `${binSize(mins[i] ?? 2 ** (i - 1))} to ${binSize(2 * (mins[i] ?? 2 ** (i - 1)))} (exclusive)`}: ${fmt.count(c)} messages (${fmt.pct((100 * c) / total)})`;
    bars.push(
      h(
        "div",
        { class: "histo-col", title, "data-bin": i, "data-count": c },
        h("span", { class: "histo-count" }, c ? fmt.compact(c) : ""),
        h("div", { class: "histo-bar", style: { height: `${c ? Math.max(2, (100 * c) / max) : 0}%` } }),
        h("span", { class: "histo-label" }, label),
      ),
    );
  }
  return h(
    "div",
    { class: "histo", role: "img", "aria-label": `Message sizes: ${fmt.plural(total, "message")}` },
    h("div", { class: "histo-bars" }, ...bars),
    h("div", { class: "histo-axis" }, `message size (lower edge of each power-of-two bin) · ${fmt.plural(total, "message")}`),
  );
}
