// Time series charts with uPlot. A chart keeps a fixed height from the
// start (loading and empty states included) so pages never jump.
import uPlot from "uplot";
import { h } from "./dom";

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
}

export const PALETTE = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#0891b2", "#db2777", "#ca8a04", "#4b5563", "#dc2626", "#65a30d"];

/** A placeholder of the chart's final size. */
export function chartFrame(title: string, height = 220): HTMLElement {
  return h(
    "figure",
    { class: "chart", style: { "--chart-h": `${height}px` } },
    h("figcaption", {}, title),
    h("div", { class: "chart-body" }, h("div", { class: "state loading" }, h("span", { class: "spinner" }), "Loading…")),
  );
}

const cleanups = new WeakMap<HTMLElement, () => void>();

/** Draws spec into a frame made by chartFrame, replacing what it showed. */
export function drawChart(frame: HTMLElement, spec: ChartSpec, signal: AbortSignal): void {
  const body = frame.querySelector(".chart-body") as HTMLElement;
  const height = spec.height ?? 220;
  cleanups.get(frame)?.();
  cleanups.delete(frame);
  body.replaceChildren();
  frame.dataset.points = String(spec.time.length);
  if (spec.time.length === 0) {
    body.append(h("div", { class: "state empty" }, "No samples in this time range."));
    return;
  }
  const width = Math.max(280, body.clientWidth || frame.clientWidth || 600);
  const markSpan = (u: uPlot) => void (frame.dataset.xSpan = String((u.scales.x?.max ?? 0) - (u.scales.x?.min ?? 0)));
  const opts: uPlot.Options = {
    width,
    height: height - 8,
    legend: { show: true, live: true },
    cursor: { drag: { x: true, y: false } },
    // data-x-span: the seconds the time axis spans, for the tests.
    hooks: { ready: [markSpan], setScale: [(u, key) => key === "x" && markSpan(u)] },
    scales: { x: { time: true }, y: spec.yMax !== undefined ? { range: [0, spec.yMax] } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [
      { stroke: "#64748b", grid: { stroke: "#eef2f7" }, ticks: { stroke: "#e2e8f0" } },
      {
        stroke: "#64748b",
        grid: { stroke: "#eef2f7" },
        ticks: { stroke: "#e2e8f0" },
        size: 72,
        values: (_u, vals) => vals.map((v) => (spec.axisFormat ?? spec.format)(v)),
      },
    ],
    series: [
      { label: "time", value: (_u, v) => (v == null ? "–" : new Date(v * 1000).toLocaleTimeString("en-GB")) },
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
  // axis over years: a minute around it instead.
  const t0 = spec.time[0]!;
  const t1 = spec.time[spec.time.length - 1]!;
  if (!(t1 > t0)) plot.setScale("x", { min: t0 - 30, max: t1 + 30 });
  const ro = new ResizeObserver(() => {
    const w = body.clientWidth;
    if (w > 0 && Math.abs(w - plot.width) > 4) plot.setSize({ width: w, height: height - 8 });
  });
  ro.observe(body);
  const cleanup = () => {
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
