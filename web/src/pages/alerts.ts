// The alerts page: what Netloom's alert rules fire on now (firing, then
// pending) and what resolved recently, each with the port or link it is
// about, its value and the jobs that crossed it since the rule's window
// began (running, or finished since, marked so); then the rules in force,
// each with what it fires on (a rise while the daemon watches, or a
// counter's reading). The daemon shows a user only the alerts naming one
// of their jobs. ?alert=ID marks one alert (Alertmanager's "source" links
// lead here).
import { get } from "../api";
import type { PortRef } from "../api";
import { h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import { portDetail } from "../ports";
import type { PageContext } from "../router";
import { table } from "../table";

export interface AlertJob {
  id: string;
  user?: string;
  bytes: number;
  state?: "running" | "finished";
  start?: string;
  end?: string;
}

export interface Alert {
  id: string;
  rule: string;
  kind: string;
  severity: "info" | "warning" | "critical";
  state: "pending" | "firing" | "resolved";
  subject: { kind: string; port?: PortRef; node?: string; remote?: PortRef; remote_node?: string; link?: string; port_name?: string; remote_name?: string };
  counter?: string;
  event?: string;
  value: number;
  threshold: number;
  summary: string;
  jobs: AlertJob[];
  jobs_since?: string;
  active_at: string;
  starts_at?: string;
  ends_at?: string;
}

export interface AlertRule {
  name: string;
  kind: string;
  severity: "info" | "warning" | "critical";
  threshold: number;
  window_seconds: number;
  counters: string[] | null;
}

export interface AlertsResponse {
  alerts: Alert[];
  firing: number;
  pending: number;
  resolved: number;
  rules?: AlertRule[];
}

const SEVERITY_RANK = { info: 0, warning: 1, critical: 2 };

function severity(a: Alert): HTMLElement {
  const cls = a.severity === "critical" ? "badge bad" : a.severity === "warning" ? "badge warn" : "badge";
  return h("span", { class: cls, "data-severity": a.severity }, a.severity);
}

function subject(a: Alert): Node {
  const s = a.subject;
  const end = (p: PortRef | undefined, name: string | undefined, port: string | undefined) => (p ? portDetail(name || p.guid, p.port, port) : "");
  let text = s.kind === "daemon" ? "the daemon" : s.kind === "fabric" ? "the fabric" : end(s.port, s.node, s.port_name);
  if (s.remote) text += (s.kind === "direction" ? " → " : " — ") + end(s.remote, s.remote_node, s.remote_name);
  return s.link ? link(`/links/${encodeURIComponent(s.link)}`, text) : h("span", {}, text);
}

function value(a: Alert): string {
  if (a.kind === "congestion" || a.kind === "utilization") return `${fmt.pct(100 * a.value)} (≥ ${fmt.pct(100 * a.threshold)})`;
  if (a.kind === "port_unreachable") return `${Math.round(a.value)} s`;
  if (a.kind === "link_degraded") return fmt.rate(a.value);
  return `${fmt.count(a.value)}${a.threshold ? ` (≥ ${fmt.count(a.threshold)})` : ""}`;
}

const stamp = (t: string) => h("time", { datetime: t }, fmt.time(t));

/** The jobs that crossed the alert's subject since its window began:
 * "since TIME: ID (user), ID (user) finished TIME, …", or "none since
 * TIME"; a pending alert has not looked its jobs up yet. */
function jobs(a: Alert): Node {
  if (!a.jobs_since) return h("span", { class: "anon-job" }, a.state === "pending" ? "looked up when it fires" : "–");
  const since = h("span", { class: "alert-jobs-since" }, "since ", stamp(a.jobs_since));
  if (!a.jobs.length) return h("span", { class: "alert-jobs none" }, "none ", since);
  return h(
    "span",
    { class: "alert-jobs" },
    since,
    ": ",
    ...a.jobs.flatMap((j, i) => [
      i ? ", " : "",
      h(
        "span",
        { class: `alert-job state-${j.state ?? "running"}`, "data-job": j.id },
        j.id.startsWith("other-") ? h("span", { class: "anon-job", title: "another user's job" }, j.id) : link(`/jobs/${encodeURIComponent(j.id)}`, j.id),
        j.user ? ` (${j.user})` : "",
        j.state === "finished" ? " " : "",
        j.state === "finished" ? h("span", { class: "badge job-finished" }, "finished", j.end ? " " : "", j.end ? stamp(j.end) : "") : "",
      ),
    ]),
  );
}

/** A duration in seconds as 45s, 1m30s, 5m, 24h (as the config writes it). */
function dur(s: number): string {
  const t = Math.round(s);
  if (t <= 0) return "0s";
  const [hh, mm, ss] = [Math.floor(t / 3600), Math.floor((t % 3600) / 60), t % 60];
  return `${hh ? `${hh}h` : ""}${mm ? `${mm}m` : ""}${ss ? `${ss}s` : ""}`;
}

/** A bit error rate as the specifications write it: 1e-12, 2.5e-10. */
const ber = (v: number): string => v.toExponential();

/** What a rule fires on, in words: a rise while the daemon watches, or a
 * counter's reading (counted since the counters were last cleared). */
export function ruleSentence(r: AlertRule): string {
  const counters = (r.counters ?? []).join(", ");
  const w = dur(r.window_seconds);
  const holds = r.window_seconds > 0 ? ` for ${w}` : "";
  switch (r.kind) {
    case "counter_increase":
      return `${counters} rise by ${fmt.count(r.threshold)} or more within ${w} (a change while Netloom watches)`;
    case "counter_total":
      return `${counters} read ${fmt.count(r.threshold)} or more (a total since the counters were last cleared, however long ago)`;
    case "link_flap":
      return `a link goes down or up ${fmt.plural(r.threshold, "time")} or more within ${w}`;
    case "link_degraded":
      return `a link is up below its expected width or speed${holds}`;
    case "congestion":
      return `a port waits to send ${fmt.pct(100 * r.threshold)} of the time or more${holds}`;
    case "utilization":
      return `a link direction carries ${fmt.pct(100 * r.threshold)} of its capacity or more${holds}`;
    case "port_unreachable":
      return `a port's counters cannot be read${holds}`;
    case "fabric_changed":
      return `a node or link comes or goes, a LID or the routes change (fires for ${w})`;
    case "daemon_behind":
      return `the daemon drops data or its queues fill${holds}`;
    case "error_trend":
      return `a link direction's errors rise and its bit error rate, fitted over the last ${w} of sweeps, reaches ${ber(r.threshold)} within ${w} (or has reached it while rising)`;
  }
  // A kind this page does not know yet (a newer daemon): its name and figures.
  return `${r.kind.replace(/_/g, " ")}${counters ? ` of ${counters}` : ""}${r.threshold ? ` at ${fmt.count(r.threshold)}` : ""}${holds}`;
}

export async function alertsPage(ctx: PageContext): Promise<void> {
  const { root, signal, search } = ctx;
  const marked = search.get("alert") ?? "";
  const summary = h("p", { class: "sub" }, "\u00a0");
  const active = h("div", {}, loading("Loading alerts…"));
  const resolved = h("div", {});
  const rules = h("div", {});
  root.append(
    h("div", { class: "page-head" }, h("h1", {}, "Alerts"), summary),
    panel("Active", active),
    panel("Resolved recently", resolved),
    panel("Rules in force", rules),
  );
  let rulesShown = "";

  const columns = (done: boolean) => [
    { key: "state", label: "State", value: (a: Alert) => a.state, cell: (a: Alert) => h("span", { class: a.state === "firing" ? "badge bad" : "badge" }, a.state) },
    { key: "severity", label: "Severity", value: (a: Alert) => SEVERITY_RANK[a.severity] ?? 0, cell: severity },
    { key: "rule", label: "Rule", value: (a: Alert) => a.rule, cell: (a: Alert) => h("code", {}, a.rule + (a.counter ? ` · ${a.counter}` : a.event ? ` · ${a.event}` : "")) },
    { key: "subject", label: "Where", value: (a: Alert) => a.subject.link ?? a.subject.node ?? a.subject.kind, cell: subject },
    { key: "value", label: "Value", value: (a: Alert) => a.value, cell: value, numeric: true },
    done
      ? { key: "time", label: "Resolved", value: (a: Alert) => a.ends_at ?? "", cell: (a: Alert) => h("time", { datetime: a.ends_at ?? "" }, fmt.time(a.ends_at ?? "")) }
      : { key: "time", label: "Since", value: (a: Alert) => a.starts_at ?? a.active_at, cell: (a: Alert) => h("time", { datetime: a.starts_at ?? a.active_at, title: a.summary }, fmt.ago(a.starts_at ?? a.active_at)) },
    // Last: the one column that wraps (a link crossed by many jobs).
    { key: "jobs", label: "Jobs that crossed it", value: (a: Alert) => a.jobs.length, cell: jobs },
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
    const shown = JSON.stringify(r.rules ?? []);
    if (shown !== rulesShown) {
      rulesShown = shown;
      rules.replaceChildren(
        table({
          label: "Alert rules",
          rows: r.rules ?? [],
          columns: [
            { key: "name", label: "Rule", value: (x: AlertRule) => x.name, cell: (x: AlertRule) => h("code", {}, x.name) },
            { key: "severity", label: "Severity", value: (x: AlertRule) => SEVERITY_RANK[x.severity] ?? 0, cell: (x: AlertRule) => h("span", { class: "badge", "data-severity": x.severity }, x.severity) },
            { key: "when", label: "Fires when", value: (x: AlertRule) => x.kind, cell: (x: AlertRule) => h("span", { class: "rule-when" }, ruleSentence(x)) },
          ],
          defaultSort: "name",
          defaultDir: "asc",
          pageSize: 50,
          rowClass: (x: AlertRule) => `rule-row rule-${x.name}`,
          param: "rules",
          empty: "No rule is in force.",
        }),
      );
    }
  };
  await load();
  const timer = setInterval(() => void load().catch(() => {}), 5000);
  signal.addEventListener("abort", () => clearInterval(timer));
}
