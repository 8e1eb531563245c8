// Colour scales of the map: utilization from cool to hot (a perceptually
// ordered ramp), 255 = not measured.

function lerp(a: number, b: number, t: number): number {
  return Math.round(a + (b - a) * t);
}

// Stops of the utilization ramp (0%, 25%, 50%, 75%, 100%).
const STOPS: [number, number, number][] = [
  [203, 213, 225], // idle: light slate
  [56, 189, 248], // sky
  [250, 204, 21], // amber
  [249, 115, 22], // orange
  [220, 38, 38], // red
];

export const UNMEASURED = "#e5e7eb";

/** UTIL_COLOR[q] is the colour of the quantized utilization q (0..255). */
export const UTIL_COLOR: string[] = Array.from({ length: 256 }, (_, q) => {
  if (q === 255) return UNMEASURED;
  const t = (q / 254) * (STOPS.length - 1);
  const i = Math.min(Math.floor(t), STOPS.length - 2);
  const f = t - i;
  const [a, b] = [STOPS[i]!, STOPS[i + 1]!];
  return `rgb(${lerp(a[0], b[0], f)},${lerp(a[1], b[1], f)},${lerp(a[2], b[2], f)})`;
});

export const SWITCH_COLOR = ["#64748b", "#475569", "#334155", "#1e293b", "#0f172a"];
export const HOST_COLOR = "#94a3b8";
export const ERROR_COLOR = "#dc2626";
export const HIGHLIGHT_COLOR = "#7c3aed";
/** Hosts of the job chosen with ?job=. */
export const JOB_COLOR = "#059669";

export function utilGradientCss(): string {
  return `linear-gradient(to right, ${[0, 64, 127, 190, 254].map((q) => UTIL_COLOR[q]).join(", ")})`;
}
