// Time per MPI function per rank, MPInside-style: one stacked bar per rank
// (x = rank, y = seconds), a segment per MPI function (the largest ones
// coloured, the rest as "other MPI"), optionally the time outside MPI on
// top. Drawn on a canvas so thousands of ranks fit: when ranks outnumber
// pixel columns, a column shows the mean of its ranks. Hover or arrow keys
// give a rank's breakdown.
import { PALETTE } from "../chart";
import { h } from "../dom";
import { onThemeChange, themeColor } from "../theme";
import type { Profile } from "./api";

const TOP = 9;
// The theme's colours (styles.css): a swatch takes them as they are, the
// canvas resolves them each time it draws (paint).
export const OTHER_COLOR = "var(--profile-other)";
const OUTSIDE_COLOR = "var(--profile-outside)";
const HEIGHT = 260;
const AXIS_W = 56;
const AXIS_H = 22;

export const SETUP_FUNCTIONS = ["MPI_Init", "MPI_Init_thread", "MPI_Finalize"];

export interface ProfileOptions {
  includeSetup: boolean;
  showOutside: boolean;
}

export function seconds(s: number): string {
  if (!Number.isFinite(s)) return "–";
  if (s === 0) return "0 s";
  if (s < 1e-3) return `${(s * 1e6).toFixed(0)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(s < 0.01 ? 2 : 1)} ms`;
  return `${s.toFixed(s < 10 ? 2 : 1)} s`;
}

export interface Segment {
  name: string;
  color: string;
  values: Float64Array; // seconds per rank index
}

/** The wait before blocking collectives (NETLOOM_WAITS), wherever drawn. */
export const WAIT_SEGMENT = "wait before collectives";
export const WAIT_COLOR = "#7f1d1d"; // not in PALETTE
/** The wait in blocking receives for a late sender (NETLOOM_WAITS: a probe
 * before each; agent/gen's waitsBefore), wherever drawn. */
export const LATE_SEGMENT = "waiting for late senders";
export const LATE_COLOR = "#c2410c"; // not in PALETTE
/** The functions whose wait_ns is the wait for a late sender; every other
 * function's is the wait before a collective. */
export const LATE_SENDER: ReadonlySet<string> = new Set(["MPI_Recv", "MPI_Sendrecv"]);

/** Seconds per rank of wait_ns summed over the columns ks. */
export function waitSeconds(p: Profile, ks: number[]): Float64Array {
  return Float64Array.from(p.wait_ns ?? [], (row) => ks.reduce((a, k) => a + (row[k] ?? 0), 0) / 1e9);
}

export function profileChart(p: Profile, opt: ProfileOptions): HTMLElement {
  const n = p.ranks.length;
  const keep = p.functions.map((f, k) => ({ f, k })).filter(({ f }) => opt.includeSetup || !SETUP_FUNCTIONS.includes(f));
  if (n === 0 || keep.length === 0) return h("div", { class: "state empty profile-empty" }, "No MPI calls recorded yet.");
  // Order functions by time over the kept set (p.functions is already by total time).
  const top = keep.slice(0, TOP);
  const rest = keep.slice(TOP);
  const segs: Segment[] = [];
  // With --waits, the waits are MPI time too: a segment at the bottom for
  // the wait before collectives, one for late senders when a rank received
  // with MPI_Recv or MPI_Sendrecv, so a bar's height stays the rank's time in MPI (the
  // "Where the ranks wait" panel splits it further).
  if (p.wait_ns) {
    const late = keep.filter(({ f }) => LATE_SENDER.has(f)).map(({ k }) => k);
    segs.push({ name: WAIT_SEGMENT, color: WAIT_COLOR, values: waitSeconds(p, keep.filter(({ f }) => !LATE_SENDER.has(f)).map(({ k }) => k)) });
    if (late.length) segs.push({ name: LATE_SEGMENT, color: LATE_COLOR, values: waitSeconds(p, late) });
  }
  segs.push(...top.map(({ f, k }, i) => ({ name: f, color: PALETTE[i % PALETTE.length]!, values: Float64Array.from(p.time_ns, (row) => (row[k] ?? 0) / 1e9) })));
  if (rest.length) segs.push({ name: `other MPI (${rest.length})`, color: OTHER_COLOR, values: Float64Array.from(p.time_ns, (row) => rest.reduce((a, { k }) => a + (row[k] ?? 0), 0) / 1e9) });
  if (opt.showOutside) segs.push({ name: "outside MPI", color: OUTSIDE_COLOR, values: Float64Array.from(p.wall_seconds, (w, i) => Math.max(0, w - (p.mpi_seconds[i] ?? 0))) });
  return stackedRanks(p.ranks, segs, "Time per MPI function, stacked per rank");
}

/** A segment's colour as the canvas takes it: a theme variable
 * ("var(--name)") resolved now, any other colour as it is. */
function paint(color: string): string {
  const m = /^var\(--([\w-]+)\)$/.exec(color);
  return m ? themeColor(m[1]!) || "#cbd5e1" : color;
}

/** One stacked bar per rank (x = rank, y = seconds), a segment per entry of
 * segs from the bottom up; columns average their ranks when ranks
 * outnumber pixels. The element carries data-ranks and data-segments;
 * hover or the arrow keys write a rank's breakdown into its readout. */
export function stackedRanks(ranks: number[], segs: Segment[], label: string): HTMLElement {
  const n = ranks.length;
  const totals = Float64Array.from({ length: n }, (_, i) => segs.reduce((a, s) => a + s.values[i]!, 0));
  const ymax = Math.max(...totals) || 1;

  const canvas = h("canvas", { class: "profile-canvas", tabindex: "0", role: "img", "aria-label": label });
  const readout = h("div", { class: "heatmap-readout", "aria-live": "polite" }, "\u00a0");
  const legend = h(
    "div",
    { class: "profile-legend" },
    ...segs.map((s) => h("span", { class: "legend-item" }, h("span", { class: "swatch", style: s.color === OUTSIDE_COLOR ? { background: s.color, border: "1px solid var(--line-strong)" } : { background: s.color } }), s.name)),
  );
  const wrap = h("div", { class: "profile" }, h("div", { class: "profile-stage" }, canvas), legend, readout);
  wrap.dataset.ranks = String(n);
  wrap.dataset.segments = segs.map((s) => s.name).join(",");

  let cols = 0;
  let ranksPerCol = 1;
  const rankRange = (c: number): [number, number] => [Math.floor(c * ranksPerCol), Math.min(n, Math.floor((c + 1) * ranksPerCol)) - 1];
  const describeCol = (c: number) => {
    const [lo, hi] = rankRange(c);
    const cnt = hi - lo + 1;
    const mean = (s: Segment) => {
      let a = 0;
      for (let i = lo; i <= hi; i++) a += s.values[i]!;
      return a / cnt;
    };
    const parts = segs.map((s) => [s.name, mean(s)] as const).filter(([, v]) => v > 0);
    const who = lo === hi ? `rank ${ranks[lo]}` : `ranks ${ranks[lo]}–${ranks[hi]} (mean)`;
    return `${who}: ${parts.map(([name, v]) => `${name} ${seconds(v)}`).join(" · ") || "no MPI time"}`;
  };

  const draw = () => {
    const W = Math.max(300, wrap.clientWidth || 900);
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(HEIGHT * dpr);
    canvas.style.width = `${W}px`;
    canvas.style.height = `${HEIGHT}px`;
    const ctx = canvas.getContext("2d")!;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, HEIGHT);
    const plotW = W - AXIS_W - 8;
    const plotH = HEIGHT - AXIS_H - 8;
    cols = Math.min(n, Math.floor(plotW));
    ranksPerCol = n / cols;
    const colW = plotW / cols;
    // The segments' colours as the theme has them now, once a draw.
    const fills = segs.map((s) => paint(s.color));
    const gap = colW >= 6 ? Math.min(colW * 0.2, 8) : 0;
    // Axis and grid, in the theme's chart colours.
    const axis = themeColor("chart-axis") || "#556479";
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = axis;
    ctx.strokeStyle = themeColor("chart-grid") || "#eef2f7";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let k = 0; k <= 4; k++) {
      const v = (ymax * k) / 4;
      const y = 8 + plotH - (plotH * k) / 4;
      ctx.beginPath();
      ctx.moveTo(AXIS_W, y + 0.5);
      ctx.lineTo(AXIS_W + plotW, y + 0.5);
      ctx.stroke();
      ctx.fillText(seconds(v), AXIS_W - 6, y);
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const labelEvery = Math.max(1, Math.ceil(cols / Math.max(1, Math.floor(plotW / 48))));
    for (let c = 0; c < cols; c++) {
      const [lo, hi] = rankRange(c);
      const cnt = hi - lo + 1;
      let y = 8 + plotH;
      for (const [k, s] of segs.entries()) {
        let a = 0;
        for (let i = lo; i <= hi; i++) a += s.values[i]!;
        const hgt = (plotH * (a / cnt)) / ymax;
        if (hgt <= 0) continue;
        ctx.fillStyle = fills[k]!;
        ctx.fillRect(AXIS_W + c * colW + gap / 2, y - hgt, Math.max(colW - gap, 1), hgt);
        y -= hgt;
      }
      if (c % labelEvery === 0) {
        ctx.fillStyle = axis;
        ctx.fillText(String(ranks[lo]), AXIS_W + c * colW + colW / 2, 8 + plotH + 4);
      }
    }
    ctx.textAlign = "left";
    ctx.fillText("rank", AXIS_W + plotW - 24, 8 + plotH + 4);
  };

  let cursor = -1;
  const show = (c: number) => {
    cursor = c;
    canvas.dataset.col = String(c);
    readout.textContent = describeCol(c);
  };
  canvas.addEventListener("mousemove", (e) => {
    const W = canvas.clientWidth;
    const c = Math.floor(((e.offsetX - AXIS_W) / (W - AXIS_W - 8)) * cols);
    if (c >= 0 && c < cols) show(c);
  });
  canvas.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    e.preventDefault();
    show(Math.max(0, Math.min(cols - 1, cursor < 0 ? 0 : cursor + (e.key === "ArrowLeft" ? -1 : 1))));
  });
  readout.textContent = `${n} ranks · max ${seconds(ymax)} per rank · hover a bar (or focus and use the arrow keys)`;
  requestAnimationFrame(draw);
  // The theme switched: drawn again in its colours, until the chart is gone.
  const themed = new AbortController();
  onThemeChange(() => (wrap.isConnected ? draw() : themed.abort()), themed.signal);
  // Redraw on resize; let go once the chart was replaced or the page left.
  let seen = false;
  const ro = new ResizeObserver(() => {
    if (!wrap.isConnected) {
      if (seen) ro.disconnect();
      return;
    }
    seen = true;
    draw();
  });
  ro.observe(wrap);
  return wrap;
}
