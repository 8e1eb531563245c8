// The alerts page: what Netloom's alert rules fire on now (firing, then
// pending) and what resolved recently, each with the port or link it is
// about, its value and the running jobs whose routes cross it. The daemon
// shows a user only the alerts naming one of their jobs. ?alert=ID marks
// one alert (Alertmanager's "source" links lead here).
import { get } from "../api";
import type { PortRef } from "../api";
import { h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import type { PageContext } from "../router";
import { table } from "../table";

export interface AlertJob {
  id: string;
  user?: string;
  bytes: number;
}

export interface Alert {
  id: string;
  rule: string;
  kind: string;
  severity: "info" | "warning" | "critical";
  state: "pending" | "firing" | "resolved";
  subject: { kind: string; port?: PortRef; node?: string; remote?: PortRef; remote_node?: string; link?: string };
  counter?: string;
  event?: string;
  value: number;
  threshold: number;
  summary: string;
  jobs: AlertJob[];
  active_at: string;
  starts_at?: string;
  ends_at?: string;
}

export interface AlertsResponse {
  alerts: Alert[];
  firing: number;
  pending: number;
  resolved: number;
}

const SEVERITY_RANK = { info: 0, warning: 1, critical: 2 };

function severity(a: Alert): HTMLElement {
  const cls = a.severity === "critical" ? "badge bad" : a.severity === "warning" ? "badge warn" : "badge";
  return h("span", { class: cls, "data-severity": a.severity }, a.severity);
}

function subject(a: Alert): Node {
  const s = a.subject;
  const end = (p: PortRef | undefined, name: string | undefined) => (p ? `${name || p.guid} port ${p.port}` : "");
  let text = s.kind === "daemon" ? "the daemon" : s.kind === "fabric" ? "the fabric" : end(s.port, s.node);
  if (s.remote) text += (s.kind === "direction" ? " → " : " — ") + end(s.remote, s.remote_node);
  return s.link ? link(`/links/${encodeURIComponent(s.link)}`, text) : h("span", {}, text);
}

function value(a: Alert): string {
  if (a.kind === "congestion" || a.kind === "utilization") return `${fmt.pct(100 * a.value)} (≥ ${fmt.pct(100 * a.threshold)})`;
  if (a.kind === "port_unreachable") return `${Math.round(a.value)} s`;
  if (a.kind === "link_degraded") return fmt.rate(a.value);
  return `${fmt.count(a.value)}${a.threshold ? ` (≥ ${fmt.count(a.threshold)})` : ""}`;
}

function jobs(a: Alert): Node {
  if (!a.jobs.length) return h("span", { class: "anon-job" }, "none running");
  return h(
    "span",
    { class: "alert-jobs" },
    ...a.jobs.flatMap((j, i) => [
      i ? ", " : "",
      j.id.startsWith("other-") ? h("span", { class: "anon-job", title: "another user's job" }, j.id) : link(`/jobs/${encodeURIComponent(j.id)}`, j.id),
      j.user ? ` (${j.user})` : "",
    ]),
  );
}

export async function alertsPage(ctx: PageContext): Promise<void> {
  const { root, signal, search } = ctx;
  const marked = search.get("alert") ?? "";
  const summary = h("p", { class: "sub" }, "\u00a0");
  const active = h("div", {}, loading("Loading alerts…"));
  const resolved = h("div", {});
  root.append(h("div", { class: "page-head" }, h("h1", {}, "Alerts"), summary), panel("Active", active), panel("Resolved recently", resolved));

  const columns = (done: boolean) => [
    { key: "state", label: "State", value: (a: Alert) => a.state, cell: (a: Alert) => h("span", { class: a.state === "firing" ? "badge bad" : "badge" }, a.state) },
    { key: "severity", label: "Severity", value: (a: Alert) => SEVERITY_RANK[a.severity] ?? 0, cell: severity },
    { key: "rule", label: "Rule", value: (a: Alert) => a.rule, cell: (a: Alert) => h("code", {}, a.rule + (a.counter ? ` · ${a.counter}` : a.event ? ` · ${a.event}` : "")) },
    { key: "subject", label: "Where", value: (a: Alert) => a.subject.link ?? a.subject.node ?? a.subject.kind, cell: subject },
    { key: "value", label: "Value", value: (a: Alert) => a.value, cell: value, numeric: true },
    { key: "jobs", label: "Jobs crossing it", value: (a: Alert) => a.jobs.length, cell: jobs },
    done
      ? { key: "time", label: "Resolved", value: (a: Alert) => a.ends_at ?? "", cell: (a: Alert) => h("time", { datetime: a.ends_at ?? "" }, fmt.time(a.ends_at ?? "")) }
      : { key: "time", label: "Since", value: (a: Alert) => a.starts_at ?? a.active_at, cell: (a: Alert) => h("time", { datetime: a.starts_at ?? a.active_at, title: a.summary }, fmt.ago(a.starts_at ?? a.active_at)) },
  ];

  const load = async () => {
    const r = await get<AlertsResponse>("/alerts", {}, signal);
    summary.textContent = `${fmt.count(r.firing)} firing, ${fmt.count(r.pending)} pending, ${fmt.count(r.resolved)} resolved recently.`;
    const rowClass = (a: Alert) => `alert-row state-${a.state}${a.id === marked ? " selected" : ""}`;
    active.replaceChildren(
      table({ label: "Active alerts", rows: r.alerts.filter((a) => a.state !== "resolved"), columns: columns(false), defaultSort: "severity", pageSize: 50, rowClass, param: "a", empty: "No alert is firing." }),
    );
    resolved.replaceChildren(
      table({ label: "Resolved alerts", rows: r.alerts.filter((a) => a.state === "resolved"), columns: columns(true), defaultSort: "time", pageSize: 20, rowClass, param: "r", empty: "No alert resolved recently." }),
    );
  };
  await load();
  const timer = setInterval(() => void load().catch(() => {}), 5000);
  signal.addEventListener("abort", () => clearInterval(timer));
}
