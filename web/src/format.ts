// Number and time formatting shared by every page.
import { formatTime } from "./time";

const units = ["B", "KB", "MB", "GB", "TB", "PB"];

export function bytes(n: number, suffix = ""): string {
  if (!Number.isFinite(n)) return "–";
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  const s = v >= 100 || i === 0 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return `${n < 0 ? "-" : ""}${s} ${units[i]}${suffix}`;
}

export const rate = (n: number): string => bytes(n, "/s");

export function pct(n: number): string {
  if (!Number.isFinite(n)) return "–";
  return n >= 10 ? `${n.toFixed(0)}%` : `${n.toFixed(1)}%`;
}

export function count(n: number): string {
  if (!Number.isFinite(n)) return "–";
  return n.toLocaleString("en-US", { maximumFractionDigits: 1 });
}

/** A time as every page writes it (time.ts): "2026-11-29 04:16:17 UTC+01:00". */
export const time = (t: string | number): string => formatTime(t);

export function ago(t: string | number): string {
  const ms = Date.now() - (typeof t === "number" ? t * 1000 : new Date(t).getTime());
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${(s / 3600).toFixed(1)}h ago`;
  return `${(s / 86400).toFixed(1)}d ago`;
}

/** Whether a link speed is an Ethernet rate ("10GbE", "2.5GbE", "100MbE",
 * as the daemon names ifHighSpeed) rather than an InfiniBand one ("EDR"). */
export const isEthernetSpeed = (speed: string): boolean => /^\d+(\.\d+)?[GM]bE$/.test(speed);

/** A link's rate as its fabric names it: InfiniBand's width and speed
 * ("4X EDR"); an Ethernet link's speed alone ("10GbE"), its width being
 * the model's "1X", no lane count of the port. */
export function linkRate(l: { width?: string; speed?: string }): string {
  const speed = l.speed ?? "";
  if (isEthernetSpeed(speed) && (!l.width || l.width === "1X")) return speed;
  return `${l.width ?? ""} ${speed}`.trim();
}

/** Short form for chart axes: 1.2k, 3.4M. */
export function compact(n: number): string {
  if (!Number.isFinite(n)) return "–";
  return n.toLocaleString("en-US", { notation: "compact", maximumFractionDigits: 1 });
}

/** A count with its noun in the number it takes: "1 port", "2 ports",
 * "1,024 rows"; many is the plural where it is not noun + "s". */
export function plural(n: number, noun: string, many = `${noun}s`): string {
  return `${count(n)} ${n === 1 ? noun : many}`;
}
