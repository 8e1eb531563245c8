// Time series charts with uPlot. A chart keeps a fixed height from the
// start (loading and empty states included) so pages never jump.
import uPlot from "uplot";
import { h } from "./dom";
import { onThemeChange, themeColor } from "./theme";
import { clock, dateOf, formatTime, zone, zoneName } from "./time";

export interface Line {
  label: string;
  values: (number | null)[];
  color: string;
  dash?: number[];
  /** Join points across missing samples (series sampled at different times). */
  spanGaps?: boolean;
}

export interface ChartSpec {
  title: string;
  time: number[];
  lines: Line[];
  format: (v: number) => string;
  axisFormat?: (v: number) => string;
  height?: number;
  yMax?: number;
  /** The y axis's unit, written along it ("errors", "ticks"); by default
   * the unit format writes after a number ("B/s", "%"). */
  unit?: string;
}

export const PALETTE = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#0891b2", "#db2777", "#ca8a04", "#4b5563", "#dc2626", "#65a30d"];

/** A placeholder of the chart's final size. */
export function chartFrame(title: string, height = CHART_H): HTMLElement {
  return h(
    "figure",
    { class: "chart", style: { "--chart-h": `${height}px` } },
    h("figcaption", {}, title),
    h("div", { class: "chart-body" }, h("div", { class: "state loading" }, h("span", { class: "spinner" }), "Loading…")),
  );
}

/** A chart's height without its legend: room for two-line time labels and
 * the axes' units. */
const CHART_H = 240;

// The axes' fonts (uPlot draws on a canvas, so they are measured there).
const AXIS_FONT = "12px system-ui, -apple-system, sans-serif";
const LABEL_FONT = "11px system-ui, -apple-system, sans-serif";
let measurer: CanvasRenderingContext2D | null = null;
function textWidth(s: string, font = AXIS_FONT): number {
  measurer ??= document.createElement("canvas").getContext("2d");
  if (!measurer) return s.length * 7;
  measurer.font = font;
  return measurer.measureText(s).width;
}

/** Whole-number steps (1, 2, 5, 10, ...) for an axis of integer counts. */
const INTEGER_INCRS = Array.from({ length: 16 }, (_, k) => [1, 2, 5].map((m) => m * 10 ** k)).flat();

/** The shortest time axis drawn as it is, in seconds; samples closer
 * together are drawn in the minute around them. */
const MIN_SPAN = 10;
/** Steps of the time axis: whole seconds at least (the labels' precision). */
const TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 91 * 86400, 365 * 86400];

/** The unit a format writes after a number ("B/s" of "1 B/s", "%" of "1.0%"), or "". */
function unitOf(format: (v: number) => string): string {
  return /^[-+]?[\d.,]+(?:e[-+]?\d+)?\s*(.*)$/i.exec(format(1))?.[1]?.trim() ?? "";
}

/** The time axis's labels: the clock time at each tick (seconds when the
 * step is under a minute), and the date under the first tick and wherever
 * the date changes; whole days are dates alone. */
function timeLabels(splits: number[], incr: number): string[] {
  let last = "";
  return splits.map((s) => {
    const date = dateOf(s);
    if (incr >= 86400) return date;
    const t = clock(s, incr % 60 !== 0);
    const line = date !== last ? `${t}\n${date}` : t;
    last = date;
    return line;
  });
}

const cleanups = new WeakMap<HTMLElement, () => void>();

/** Draws spec into a frame made by chartFrame, replacing what it showed. */
export function drawChart(frame: HTMLElement, spec: ChartSpec, signal: AbortSignal): void {
  const body = frame.querySelector(".chart-body") as HTMLElement;
  const height = spec.height ?? CHART_H;
  cleanups.get(frame)?.();
  cleanups.delete(frame);
  body.replaceChildren();
  frame.dataset.points = String(spec.time.length);
  if (spec.time.length === 0) {
    body.append(h("div", { class: "state empty" }, "No samples in this time range."));
    return;
  }
  const width = Math.max(280, body.clientWidth || frame.clientWidth || 600);
  const markAxis = (u: uPlot) => void Object.assign(frame.dataset, { xMin: String(u.scales.x?.min ?? 0), xMax: String(u.scales.x?.max ?? 0) });
  const fmtAxis = spec.axisFormat ?? spec.format;
  // Counters (every value a whole number) tick at whole numbers only.
  const integer = spec.lines.every((l) => l.values.every((v) => v == null || Number.isInteger(v)));
  const unit = spec.unit ?? unitOf(spec.format);
  const axis = themeColor("chart-axis") || "#64748b";
  const grid = themeColor("chart-grid") || "#eef2f7";
  const tick = themeColor("chart-tick") || "#e2e8f0";
  const z = zone();
  const opts: uPlot.Options = {
    width,
    height: height - 8,
    legend: { show: true, live: true },
    cursor: { drag: { x: true, y: false } },
    // data-x-min, data-x-max: the time axis's ends (Unix seconds), for the tests.
    hooks: { ready: [markAxis], setScale: [(u, key) => key === "x" && markAxis(u)] },
    ...(z === "utc" ? { tzDate: (ts: number) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC") } : {}),
    scales: {
      x: { time: true },
      y: spec.yMax !== undefined ? { range: [0, spec.yMax] } : { range: (_u, _min, max) => [0, max > 0 ? (integer ? Math.max(1, Math.ceil(max * 1.1)) : max * 1.1) : 1] },
    },
    axes: [
      {
        stroke: axis,
        font: AXIS_FONT,
        labelFont: LABEL_FONT,
        grid: { stroke: grid },
        ticks: { stroke: tick },
        // Two lines (time, date); ticks no closer than the widest label.
        size: 50,
        space: Math.ceil(textWidth("2026-12-31")) + 24,
        incrs: TIME_INCRS,
        values: (_u, splits, _i, _space, incr) => timeLabels(splits, incr),
        label: `time (${zoneName(spec.time[0])})`,
        labelSize: 16,
        labelGap: 0,
      },
      {
        stroke: axis,
        font: AXIS_FONT,
        labelFont: LABEL_FONT,
        grid: { stroke: grid },
        ticks: { stroke: tick },
        ...(integer ? { incrs: INTEGER_INCRS } : {}),
        // As wide as the widest label, so none is cut.
        size: (_u, values) => Math.ceil(Math.max(24, ...(values ?? []).map((v) => textWidth(String(v ?? ""))))) + 18,
        values: (_u, vals) => vals.map((v) => fmtAxis(v)),
        ...(unit ? { label: unit, labelSize: 18, labelGap: 2 } : {}),
      },
    ],
    series: [
      { label: "time", value: (_u, v) => (v == null ? "–" : formatTime(v)) },
      ...spec.lines.map((l) => ({
        label: l.label,
        stroke: l.color,
        width: 1.5,
        dash: l.dash,
        spanGaps: l.spanGaps,
        points: { show: spec.time.length < 60 },
        value: (_u: uPlot, v: number | null) => (v == null ? "–" : spec.format(v)),
      })),
    ],
  };
  const data = [spec.time, ...spec.lines.map((l) => l.values)] as uPlot.AlignedData;
  const plot = new uPlot(opts, data, body);
  // One sample (a range shorter than the sweep interval, or an agent that
  // refreshes its counters seconds apart) would have uPlot spread the time
  // axis over years, and samples under MIN_SPAN apart (a few sweeps) leave
  // no room for a tick of a whole second (with two 0.5 s apart uPlot drew
  // a label past the canvas): the minute around them instead.
  const t0 = spec.time[0]!;
  const t1 = spec.time[spec.time.length - 1]!;
  if (!(t1 - t0 >= MIN_SPAN)) plot.setScale("x", { min: (t0 + t1) / 2 - 30, max: (t0 + t1) / 2 + 30 });
  const ro = new ResizeObserver(() => {
    const w = body.clientWidth;
    if (w > 0 && Math.abs(w - plot.width) > 4) plot.setSize({ width: w, height: height - 8 });
  });
  ro.observe(body);
  // A change of theme draws the chart again in its colours.
  const themed = new AbortController();
  onThemeChange(() => drawChart(frame, spec, signal), themed.signal);
  const cleanup = () => {
    themed.abort();
    ro.disconnect();
    plot.destroy();
    cleanups.delete(frame);
  };
  cleanups.set(frame, cleanup);
  signal.addEventListener("abort", cleanup);
}

export function chartError(frame: HTMLElement, err: unknown): void {
  const body = frame.querySelector(".chart-body") as HTMLElement;
  body.replaceChildren(h("div", { class: "state error", role: "alert" }, err instanceof Error ? err.message : String(err)));
}
