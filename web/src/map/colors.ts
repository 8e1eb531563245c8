// Colour scales of the map: utilization from cool to hot (a perceptually
// ordered ramp), 255 = not measured; and the nodes' and labels' colours,
// which follow the page's theme (CSS variables, read by readMapTheme).
import { themeColor } from "../theme";

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

/** The colour of a utilization in percent (0..100): the stops at 0, 25,
 * 50, 75 and 100%, mixed linearly between them. */
export function utilColor(pct: number): string {
  const t = (Math.min(100, Math.max(0, pct)) / 100) * (STOPS.length - 1);
  const i = Math.min(Math.floor(t), STOPS.length - 2);
  const f = t - i;
  const [a, b] = [STOPS[i]!, STOPS[i + 1]!];
  return `rgb(${lerp(a[0], b[0], f)},${lerp(a[1], b[1], f)},${lerp(a[2], b[2], f)})`;
}

/** UTIL_COLOR[q] is the colour of the quantized utilization q (0..254 for
 * 0..100%); UTIL_COLOR[255], not measured, follows the theme. */
export const UTIL_COLOR: string[] = Array.from({ length: 256 }, (_, q) => (q === 255 ? "#e5e7eb" : utilColor(q / 2.54)));

export const ERROR_COLOR = "#dc2626";
export const HIGHLIGHT_COLOR = "#7c3aed";
/** Hosts of the job chosen with ?job=. */
export const JOB_COLOR = "#059669";

/** The theme's colours of the map: switches by level, hosts, labels and
 * their halo, links not measured. */
export const MAP_THEME = {
  switches: ["#64748b", "#475569", "#334155", "#1e293b", "#0f172a"],
  host: "#94a3b8",
  label: "#0f172a",
  bg: "#fbfcfd",
  unmeasured: "#e5e7eb",
};

/** Reads the map's colours from the page's theme (styles.css's --map-*
 * variables); those not set keep their light defaults. */
export function readMapTheme(): void {
  const v = (name: string, fallback: string) => themeColor(name) || fallback;
  MAP_THEME.switches = MAP_THEME.switches.map((c, k) => v(`map-switch-${k + 1}`, c));
  MAP_THEME.host = v("map-host", MAP_THEME.host);
  MAP_THEME.label = v("map-label", MAP_THEME.label);
  MAP_THEME.bg = v("map-bg", MAP_THEME.bg);
  MAP_THEME.unmeasured = v("map-unmeasured", MAP_THEME.unmeasured);
  UTIL_COLOR[255] = MAP_THEME.unmeasured;
}
