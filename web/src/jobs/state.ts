// A job's state and duration as the jobs page and the job page show them.
import { h } from "../dom";
import type { JobSummary } from "./api";

/** A duration in seconds, in the largest unit that reads well. */
export function duration(s: number): string {
  if (!Number.isFinite(s) || s <= 0) return "–";
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** running, finished, or ended with the reason (timed out, …). */
export function stateBadge(j: JobSummary): HTMLElement {
  if (j.state === "running") return h("span", { class: "badge run" }, "running");
  const bad = j.end_reason && j.end_reason !== "final";
  return h("span", { class: `badge ${bad ? "warn" : ""}`, title: j.end_reason ? `ended: ${j.end_reason}` : "" }, bad ? `ended (${j.end_reason!.replace(/_/g, " ")})` : "finished");
}
