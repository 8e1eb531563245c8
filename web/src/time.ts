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

/** Unix seconds to the value of an <input type="datetime-local">. */
export function toLocalInput(sec: number): string {
  const d = new Date(sec * 1000);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function fromLocalInput(v: string): number | undefined {
  const t = new Date(v).getTime();
  return Number.isFinite(t) ? t / 1000 : undefined;
}

export function describe(t: TimeView): string {
  const f = (s?: number) => (s === undefined ? "?" : new Date(s * 1000).toLocaleString());
  if (t.mode === "at") return `as of ${f(t.at)}`;
  if (t.mode === "range") return `${f(t.from)} – ${f(t.to)}`;
  return "live";
}
