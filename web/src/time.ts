// The time control's state lives in the URL so a link shares the view:
// no parameter = live; ?at=T = the fabric as it was at T; ?from=F&to=T = a
// past range (shown as of T). Times are Unix seconds.

export type TimeMode = "live" | "at" | "range";

export interface TimeView {
  mode: TimeMode;
  at?: number; // set for "at" and "range" (= to)
  from?: number;
  to?: number;
}

/** Default chart window when only a point in time is given. */
export const DEFAULT_WINDOW_S = 15 * 60;

export function readTime(search: URLSearchParams = new URLSearchParams(location.search)): TimeView {
  const num = (k: string): number | undefined => {
    const v = search.get(k);
    if (v === null || v === "") return undefined;
    const n = Number(v);
    return Number.isFinite(n) ? n : undefined;
  };
  const from = num("from");
  const to = num("to");
  if (from !== undefined && to !== undefined && from < to) return { mode: "range", from, to, at: to };
  const at = num("at");
  if (at !== undefined) return { mode: "at", at };
  return { mode: "live" };
}

/** The query parameters every fabric endpoint takes for this view. */
export function atParams(t: TimeView): Record<string, string> {
  return t.at !== undefined ? { at: String(t.at) } : {};
}

/** The series range of this view. */
export function rangeParams(t: TimeView, windowS = DEFAULT_WINDOW_S): Record<string, string> {
  if (t.mode === "range") return { from: String(t.from), to: String(t.to) };
  if (t.mode === "at") return { from: String((t.at ?? 0) - windowS), to: String(t.at) };
  return { from: `-${windowS}s` };
}

/** Writes the time view into URL search parameters (others are kept). */
export function writeTime(search: URLSearchParams, t: TimeView): void {
  search.delete("at");
  search.delete("from");
  search.delete("to");
  if (t.mode === "at" && t.at !== undefined) search.set("at", String(Math.round(t.at)));
  if (t.mode === "range" && t.from !== undefined && t.to !== undefined) {
    search.set("from", String(Math.round(t.from)));
    search.set("to", String(Math.round(t.to)));
  }
}

/** Search string carrying only the time view, for links between pages. */
export function timeQuery(t: TimeView = readTime()): string {
  const s = new URLSearchParams();
  writeTime(s, t);
  const q = s.toString();
  return q ? "?" + q : "";
}

// One way to write time on every page: ISO-like dates in the zone the
// person chose, stated with it ("2026-11-29 04:16:17 UTC+01:00"). The zone
// is the browser's by default or UTC, remembered in localStorage.

export type Zone = "local" | "utc";

const ZONE_KEY = "netloom.zone";

/** The zone times are written in: the browser's ("local") or UTC. */
export function zone(): Zone {
  if (chosen) return chosen;
  try {
    chosen = localStorage.getItem(ZONE_KEY) === "utc" ? "utc" : "local";
  } catch {
    chosen = "local";
  }
  return chosen;
}

let chosen: Zone | null = null;

/** Chooses the zone, remembered in localStorage. */
export function setZone(z: Zone): void {
  try {
    localStorage.setItem(ZONE_KEY, z);
  } catch {
    /* storage refused: the choice lasts until the page reloads */
  }
  chosen = z;
}

/** Unix seconds of an API time (RFC 3339 string) or of Unix seconds. */
export function seconds(t: string | number): number {
  return typeof t === "number" ? t : new Date(t).getTime() / 1000;
}

/** Minutes east of UTC of zone z at Unix second sec. */
export function offsetMinutes(sec: number, z: Zone = zone()): number {
  return z === "utc" ? 0 : -new Date(sec * 1000).getTimezoneOffset();
}

const p2 = (n: number) => String(n).padStart(2, "0");

/** The zone's name at sec: "UTC", or the browser's offset ("UTC+01:00"). */
export function zoneName(sec: number = Date.now() / 1000, z: Zone = zone()): string {
  if (z === "utc") return "UTC";
  const o = offsetMinutes(sec, z);
  const a = Math.abs(o);
  return `UTC${o < 0 ? "-" : "+"}${p2(Math.floor(a / 60))}:${p2(a % 60)}`;
}

/** Wall-clock fields of sec in zone z: [year, month 1-12, day, hour, minute, second]. */
function fields(sec: number, z: Zone): number[] {
  const s = Math.floor(sec);
  const d = new Date((s + offsetMinutes(s, z) * 60) * 1000);
  return [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
}

/** "2026-11-29" in zone z. */
export function dateOf(sec: number, z: Zone = zone()): string {
  const f = fields(sec, z);
  return `${f[0]}-${p2(f[1]!)}-${p2(f[2]!)}`;
}

/** "04:16:17" (or "04:16" without seconds) in zone z. */
export function clock(sec: number, withSeconds = true, z: Zone = zone()): string {
  const f = fields(sec, z);
  return `${p2(f[3]!)}:${p2(f[4]!)}${withSeconds ? ":" + p2(f[5]!) : ""}`;
}

/** "2026-11-29 04:16:17 UTC+01:00": how every page writes a time. */
export function formatTime(t: string | number, z: Zone = zone()): string {
  const s = seconds(t);
  if (!Number.isFinite(s)) return "–";
  return `${dateOf(s, z)} ${clock(s, true, z)} ${zoneName(s, z)}`;
}

/** What a time field holds and takes: "YYYY-MM-DD HH:MM:SS". */
export const INPUT_FORMAT = "YYYY-MM-DD HH:MM:SS";

/** Unix seconds as a time field shows them in zone z ("2026-11-29 04:16:17"). */
export function toInput(sec: number, z: Zone = zone()): string {
  return `${dateOf(sec, z)} ${clock(sec, true, z)}`;
}

/** A time field's text ("2026-11-29 04:16:17", seconds optional, or with
 * a "T" as datetime-local writes it), read as a time in zone z, to Unix
 * seconds; undefined when it is not one. */
export function fromInput(v: string, z: Zone = zone()): number | undefined {
  const m = /^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d))?$/.exec(v.trim());
  if (!m) return undefined;
  const n = m.slice(1).map((x) => Number(x ?? 0));
  const wall = Date.UTC(n[0]!, n[1]! - 1, n[2]!, n[3]!, n[4]!, n[5]!) / 1000;
  // 2026-02-30 or 25:00 is no time (Date.UTC would roll it over).
  const back = new Date(wall * 1000);
  if (back.getUTCMonth() + 1 !== n[1] || back.getUTCDate() !== n[2] || n[3]! > 23 || n[4]! > 59 || n[5]! > 59) return undefined;
  // The offset at the wall time read as UTC, then at the time it gives
  // (the two differ only next to a change of daylight saving time).
  const guess = wall - offsetMinutes(wall, z) * 60;
  return wall - offsetMinutes(guess, z) * 60;
}

export function describe(t: TimeView): string {
  const f = (s?: number) => (s === undefined ? "?" : formatTime(s));
  if (t.mode === "at") return `as of ${f(t.at)}`;
  if (t.mode === "range") return `${f(t.from)} – ${f(t.to)}`;
  return "live";
}
