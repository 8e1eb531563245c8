// A communication matrix drawn as a canvas image: one pixel per cell,
// scaled up by a whole number so cells stay sharp; above the display size,
// blocks of ranks are summed into one pixel so thousands of ranks stay
// readable. Log colour scale with a legend; hovering (or the arrow keys)
// names sender, receiver and value.
import { h } from "../dom";
import * as fmt from "../format";
import type { MatrixResponse } from "./api";

/** Display edge in CSS pixels. */
const SIZE = 440;

const STOPS: [number, number, number][] = [
  [219, 234, 254],
  [56, 189, 248],
  [250, 204, 21],
  [249, 115, 22],
  [153, 27, 27],
];
const ZERO: [number, number, number] = [248, 250, 252];

/** RAMP[k] for k in 0..255: the colour of a non-zero cell. */
const RAMP: [number, number, number][] = Array.from({ length: 256 }, (_, k) => {
  const t = (k / 255) * (STOPS.length - 1);
  const i = Math.min(Math.floor(t), STOPS.length - 2);
  const f = t - i;
  const a = STOPS[i]!;
  const b = STOPS[i + 1]!;
  return [0, 1, 2].map((c) => Math.round(a[c]! + (b[c]! - a[c]!) * f)) as [number, number, number];
});

export function rampCss(): string {
  return `linear-gradient(to right, ${[0, 64, 128, 192, 255].map((k) => `rgb(${RAMP[k]!.join(",")})`).join(", ")})`;
}

export interface Heatmap {
  el: HTMLElement;
  set: (m: MatrixResponse) => void;
  fail: (message: string) => void;
}

export function heatmap(title: string): Heatmap {
  const canvas = h("canvas", { class: "heatmap-canvas", tabindex: "0", role: "img", "aria-label": `${title} communication matrix` });
  const tip = h("div", { class: "heatmap-tip", hidden: true });
  const readout = h("div", { class: "heatmap-readout", "aria-live": "polite" }, "\u00a0");
  const yTicks = h("div", { class: "heatmap-yticks", "aria-hidden": "true" });
  const xTicks = h("div", { class: "heatmap-xticks", "aria-hidden": "true" });
  const legend = h("div", { class: "heatmap-legend" });
  const stage = h("div", { class: "heatmap-stage", style: { width: `${SIZE}px`, height: `${SIZE}px` } }, canvas, tip);
  const body = h("div", { class: "heatmap-body" }, loadingBox());
  const el = h(
    "figure",
    { class: "heatmap" },
    h("figcaption", {}, title),
    body,
  );
  const frame = h(
    "div",
    { class: "heatmap-frame" },
    h("div", { class: "heatmap-axis-x" }, "receiver →"),
    xTicks,
    h("div", { class: "heatmap-row" }, h("div", { class: "heatmap-axis-y" }, "sender ↓"), yTicks, stage),
  );

  let m: MatrixResponse | null = null;
  let block = 1; // cells per pixel edge
  let grid = 0; // pixels per edge of the image
  let cellPx = 1; // CSS pixels per image pixel
  let agg: Float64Array = new Float64Array(0);
  let cursor: [number, number] | null = null;

  const name = (k: number) => m!.labels?.[k] ?? String(k);
  const label = (i: number): string => {
    const lo = i * block;
    const hi = Math.min(m!.size, lo + block) - 1;
    const what = m!.level === "rank" ? "rank" : "node";
    return lo === hi ? `${what} ${name(lo)}` : `${what}s ${name(lo)}–${name(hi)}`;
  };
  const valueText = (v: number) => (m!.metric === "bytes" ? `${fmt.bytes(v)} (${fmt.count(v)} bytes)` : fmt.plural(v, "message"));
  const describeCell = (r: number, c: number) => `${label(r)} → ${label(c)}: ${valueText(agg[r * grid + c]!)}`;

  const show = (r: number, c: number, x?: number, y?: number) => {
    cursor = [r, c];
    const text = describeCell(r, c);
    readout.textContent = text;
    canvas.dataset.cell = `${r},${c}`;
    if (x !== undefined && y !== undefined) {
      tip.hidden = false;
      tip.textContent = text;
      tip.style.left = `${Math.min(x + 12, SIZE - 180)}px`;
      tip.style.top = `${y + 14}px`;
    } else tip.hidden = true;
  };
  canvas.addEventListener("mousemove", (e) => {
    if (!m || grid === 0) return;
    const c = Math.floor(e.offsetX / cellPx);
    const r = Math.floor(e.offsetY / cellPx);
    if (r < 0 || c < 0 || r >= grid || c >= grid) return;
    show(r, c, e.offsetX, e.offsetY);
  });
  canvas.addEventListener("mouseleave", () => (tip.hidden = true));
  canvas.addEventListener("keydown", (e) => {
    if (!m || grid === 0) return;
    const [r, c] = cursor ?? [0, 0];
    const d: Record<string, [number, number]> = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const mv = d[e.key];
    if (!mv) return;
    e.preventDefault();
    show(Math.max(0, Math.min(grid - 1, r + (cursor ? mv[0] : 0))), Math.max(0, Math.min(grid - 1, c + (cursor ? mv[1] : 0))));
  });

  const set = (mx: MatrixResponse) => {
    m = mx;
    const n = mx.size;
    if (n === 0 || !mx.values.some((v) => v > 0)) {
      body.replaceChildren(h("div", { class: "state empty heatmap-empty" }, n === 0 ? "No ranks have reported yet." : `No ${mx.class === "all" ? "" : className(mx.class) + " "}traffic between ${mx.level}s.`));
      el.dataset.n = String(n);
      el.dataset.max = "0";
      return;
    }
    block = Math.ceil(n / SIZE);
    grid = Math.ceil(n / block);
    cellPx = Math.max(1, Math.floor(SIZE / grid));
    agg = new Float64Array(grid * grid);
    let max = 0;
    let min = Infinity;
    for (let k = 0; k < mx.values.length; k++) {
      const i = mx.src[k]!;
      const j = mx.dst[k]!;
      if (i < n && j < n) agg[Math.floor(i / block) * grid + Math.floor(j / block)]! += mx.values[k]!;
    }
    for (const v of agg) {
      if (v > 0) {
        max = Math.max(max, v);
        min = Math.min(min, v);
      }
    }
    canvas.width = grid;
    canvas.height = grid;
    canvas.style.width = canvas.style.height = `${grid * cellPx}px`;
    const ctx = canvas.getContext("2d")!;
    const img = ctx.createImageData(grid, grid);
    const lmin = Math.log(min);
    const span = Math.log(max) - lmin;
    for (let k = 0; k < agg.length; k++) {
      const v = agg[k]!;
      const c = v > 0 ? RAMP[span > 0 ? Math.round((255 * (Math.log(v) - lmin)) / span) : 255]! : ZERO;
      img.data[4 * k] = c[0];
      img.data[4 * k + 1] = c[1];
      img.data[4 * k + 2] = c[2];
      img.data[4 * k + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    el.dataset.n = String(n);
    el.dataset.grid = String(grid);
    el.dataset.block = String(block);
    el.dataset.cellPx = String(cellPx);
    el.dataset.max = String(max);
    // Ticks: every cell when few, else about eight.
    const every = grid <= 24 ? 1 : Math.ceil(grid / 8);
    const ticks = (vertical: boolean) =>
      Array.from({ length: Math.ceil(grid / every) }, (_, k) => {
        const i = k * every;
        const lo = i * block;
        const text = name(lo);
        const pos = i * cellPx + (every === 1 ? cellPx / 2 : 0);
        return h("span", { style: vertical ? { top: `${pos}px` } : { left: `${pos}px` }, class: every === 1 ? "mid" : "" }, text);
      });
    yTicks.replaceChildren(...ticks(true));
    yTicks.style.height = `${grid * cellPx}px`;
    xTicks.replaceChildren(...ticks(false));
    const unit = mx.metric === "bytes" ? fmt.bytes : (v: number) => `${fmt.count(v)} msgs`;
    legend.replaceChildren(
      h("span", { class: "swatch", style: { background: `rgb(${ZERO.join(",")})`, border: "1px solid #e2e8f0" } }),
      h("span", {}, "none"),
      h("span", { class: "legend-min" }, unit(min)),
      h("span", { class: "ramp", style: { background: rampCss() } }),
      h("span", { class: "legend-max" }, unit(max)),
      h("span", { class: "dim-text" }, block > 1 ? `log scale · ${block}×${block} ${mx.level}s per pixel (summed)` : "log scale"),
    );
    if (!body.contains(frame)) body.replaceChildren(frame, legend, readout);
    if (cursor && cursor[0] < grid && cursor[1] < grid) show(cursor[0], cursor[1]);
    else readout.textContent = `${n} ${mx.level}s · hover a cell (or focus and use the arrow keys)${mx.peers_truncated ? " · some ranks sent only their top peers" : ""}`;
  };

  const fail = (message: string) => {
    m = null;
    grid = 0;
    body.replaceChildren(h("div", { class: "state empty heatmap-empty" }, message));
  };
  return { el, set, fail };
}

function loadingBox(): HTMLElement {
  return h("div", { class: "state loading heatmap-empty" }, h("span", { class: "spinner", "aria-hidden": "true" }), "Loading…");
}

export function className(c: string): string {
  return c === "p2p" ? "point-to-point" : c === "coll" ? "collective" : c === "rma" ? "one-sided" : "all";
}
