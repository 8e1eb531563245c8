// The link health page (docs/health.md): link directions ranked by risk
// with their history and prediction, the degraded links, the jobs a link
// hurt in the last 7 days, and the repair-impact question (a link, a
// switch or nodes to take out: whose jobs, and the load after).
//
// Every figure is shown as the API gives it, formatted by the helpers
// below (the page test formats the API's figures the same way).
import { ApiError, get } from "../api";
import type { PortRef } from "../api";
import { chartFrame, drawChart, PALETTE } from "../chart";
import { empty, failure, h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import { portLabel } from "../ports";
import type { PageContext } from "../router";
import { table } from "../table";

interface Prediction {
  ber_limit: number;
  crosses_at: string;
  in_seconds: number;
  crossed: boolean;
  confidence: number;
  rising_since: string;
}

interface HealthDirection {
  link: string;
  from: PortRef;
  to: PortRef;
  from_node?: string;
  to_node?: string;
  from_name?: string;
  to_name?: string;
  width?: string;
  speed?: string;
  status: string;
  risk: number;
  trend: string;
  symbol_errors: number;
  link_integrity_errors: number;
  rcv_errors: number;
  link_recovers: number;
  link_downed: number;
  symbol_errors_per_second: number;
  ber: number;
  ber_now: number;
  prediction?: Prediction;
  series?: { time: string; seconds: number; symbol_errors: number; ber: number; skipped?: string }[];
}

interface HealthResponse {
  window_seconds: number;
  ber_limit: number;
  links: number;
  /** Directions in all; directions holds the riskiest limit of them
   * (truncated: fewer listed). */
  total: number;
  limit: number;
  truncated: boolean;
  counts: Record<string, number>;
  directions: HealthDirection[];
  degraded: Degraded[];
}

interface JobImpact {
  job: string;
  user?: string;
  ranks: number;
  nodes: string[];
  ranks_affected: number;
  bytes: number;
  pairs_crossing: number;
  moved_bytes: number;
  unroutable_bytes?: number;
  pairs_from?: string;
}

interface Degraded {
  link: string;
  a: PortRef;
  b: PortRef;
  a_node: string;
  b_node: string;
  a_name?: string;
  b_name?: string;
  width: string;
  speed: string;
  expected: { width: string; speed: string };
  fraction: number;
  reason: string;
  jobs: JobImpact[];
}

interface DirLoad {
  link: string;
  from: PortRef;
  to: PortRef;
  from_node?: string;
  to_node?: string;
  from_name?: string;
  to_name?: string;
  bytes: number;
  utilization_pct: number;
}

interface Impact {
  target: { kind: string; name: string };
  state: string;
  down_since?: string;
  route_model: string;
  route_note: string;
  traffic_note: string;
  seconds: number;
  jobs: JobImpact[];
  removed: DirLoad[];
  moved_bytes: number;
  unroutable_bytes: number;
  heaviest_before: DirLoad | null;
  heaviest_after: DirLoad | null;
  changes: (DirLoad & { bytes_before: number; bytes_after: number; delta_bytes: number })[];
  pairs_total: number;
  errors?: string[];
}

interface Hurt {
  link: string;
  error_spans: { from: string; to: string; errors: number }[];
  jobs: { job: string; user?: string; state?: string; bytes: number; spans: number }[];
}

/** The page's number formats (the test uses the same). */
export const ber = (v: number): string => (v > 0 ? v.toExponential(2) : "0");
export const risk = (v: number): string => (v > 0 ? v.toPrecision(3) : "0");
export const n = (v: number): string => v.toLocaleString("en-US", { maximumFractionDigits: 1 });

// A port as the other pages write it (ports.ts): "leaf1 swp1" where the
// fabric names it, else "leaf1:2".
const portName = (node: string | undefined, p: PortRef, name?: string) => portLabel(node || p.guid, p.port, name);
const dirName = (d: { from: PortRef; to: PortRef; from_node?: string; to_node?: string; from_name?: string; to_name?: string }) =>
  `${portName(d.from_node, d.from, d.from_name)} → ${portName(d.to_node, d.to, d.to_name)}`;

function predictionText(p: Prediction | undefined): string {
  if (!p) return "—";
  if (!p.crosses_at || p.crosses_at.startsWith("0001-")) return `rising since ${fmt.time(p.rising_since)}`;
  return p.crossed ? `crossed ${ber(p.ber_limit)} at ${fmt.time(p.crosses_at)}` : `crosses ${ber(p.ber_limit)} at ${fmt.time(p.crosses_at)}`;
}

const statusClass = (s: string) => (s === "rising" || s === "over_limit" ? "badge bad" : s === "retrained" || s === "errors" ? "badge warn" : "badge");

function jobsTable(label: string, rows: JobImpact[], param: string, emptyText: string): HTMLElement {
  return table({
    label,
    rows,
    param,
    defaultSort: "bytes",
    pageSize: 20,
    empty: emptyText,
    columns: [
      { key: "job", label: "Job", value: (j) => j.job, cell: (j) => link(`/jobs/${encodeURIComponent(j.job)}`, j.job) },
      { key: "user", label: "User", value: (j) => j.user ?? "" },
      { key: "ranks", label: "Ranks", value: (j) => j.ranks, cell: (j) => n(j.ranks), numeric: true },
      { key: "affected", label: "Ranks affected", value: (j) => j.ranks_affected, cell: (j) => n(j.ranks_affected), numeric: true },
      { key: "pairs", label: "Node pairs crossing", value: (j) => j.pairs_crossing, cell: (j) => n(j.pairs_crossing), numeric: true },
      { key: "bytes", label: "Bytes on it", value: (j) => j.bytes, cell: (j) => n(j.bytes), numeric: true },
    ],
  });
}

export async function healthPage(ctx: PageContext): Promise<void> {
  const { root, signal, search } = ctx;
  const window = search.get("window") || "1h";
  const summary = h("p", { class: "sub", id: "health-summary" }, "\u00a0");
  const ranked = h("div", { id: "health-ranked" }, loading("Ranking links…"));
  const detail = h("div", { id: "health-detail" }, empty("Pick a link in the ranking to see its history."));
  const degraded = h("div", { id: "health-degraded" }, loading());
  const impactOut = h("div", { id: "impact-answer" }, empty("Ask what taking a link, a switch or nodes out would cost."));
  const kind = h("select", { id: "impact-kind" }, h("option", { value: "link" }, "Link"), h("option", { value: "switch" }, "Switch"), h("option", { value: "nodes" }, "Nodes"));
  const what = h("input", { id: "impact-value", type: "text", class: "text-input", placeholder: "GUID:PORT-GUID:PORT, a switch, or n1,n2", size: 48 });
  const ask = async () => {
    const v = what.value.trim();
    impactOut.replaceChildren(loading("Routing around it…"));
    try {
      const im = await get<Impact>("/health/impact", { [kind.value]: v }, signal);
      impactOut.replaceChildren(impactView(im));
    } catch (err) {
      if (signal.aborted) return;
      impactOut.replaceChildren(failure(err instanceof ApiError ? err.message : err));
    }
  };
  const form = h(
    "form",
    {
      class: "filters",
      id: "impact-form",
      onsubmit: (e: Event) => {
        e.preventDefault();
        void ask();
      },
    },
    h("label", { for: "impact-kind" }, "Take out"),
    kind,
    what,
    h("button", { type: "submit", class: "btn" }, "Show impact"),
  );
  root.append(
    h("div", { class: "page-head" }, h("h1", {}, "Link health"), summary),
    panel("Links ranked by risk", ranked),
    panel("History and prediction", detail),
    panel("Degraded links", degraded),
    panel("Repair impact", h("div", {}, form, impactOut)),
  );

  const showLink = async (id: string) => {
    detail.replaceChildren(loading());
    what.value = id;
    kind.value = "link";
    try {
      const [lh, hurt] = await Promise.all([
        get<{ directions: HealthDirection[]; ber_limit: number }>(`/health/links/${id}`, { window }, signal),
        get<Hurt>("/health/hurt", { link: id }, signal),
      ]);
      const frame = chartFrame("Bit error rate per sample", 220);
      frame.id = "health-chart";
      const times = [...new Set(lh.directions.flatMap((d) => (d.series ?? []).map((p) => Date.parse(p.time) / 1000)))].sort((a, b) => a - b);
      const lines = lh.directions.map((d, i) => {
        const by = new Map((d.series ?? []).filter((p) => !p.skipped).map((p) => [Date.parse(p.time) / 1000, p.ber]));
        return { label: dirName(d), values: times.map((t) => by.get(t) ?? null), color: PALETTE[i]!, spanGaps: true };
      });
      const dirs = h(
        "div",
        { class: "health-dirs" },
        ...lh.directions.map((d) =>
          h(
            "dl",
            { class: "kv", "data-to": `${d.to.guid}:${d.to.port}` },
            h("dt", {}, "Direction"),
            h("dd", {}, dirName(d)),
            h("dt", {}, "Status"),
            h("dd", { "data-field": "status" }, d.status),
            h("dt", {}, "BER now"),
            h("dd", { "data-field": "ber_now" }, ber(d.ber_now)),
            h("dt", {}, "Samples"),
            h("dd", { "data-field": "samples" }, n(d.series?.length ?? 0)),
            h("dt", {}, "Prediction"),
            h("dd", { "data-field": "prediction" }, predictionText(d.prediction)),
            h("dt", {}, "Fit R²"),
            h("dd", { "data-field": "confidence" }, d.prediction ? d.prediction.confidence.toFixed(2) : "—"),
          ),
        ),
      );
      const hurtBox = h(
        "div",
        { id: "health-hurt" },
        h("h3", {}, "Jobs hurt in the last 7 days"),
        h("p", { class: "sub", "data-field": "spans" }, `${fmt.plural(hurt.error_spans.length, "span")} with errors`),
        table({
          label: "Jobs whose traffic crossed the link while it counted errors",
          rows: hurt.jobs,
          param: "h",
          defaultSort: "bytes",
          pageSize: 20,
          empty: "No job's traffic crossed this link while it counted errors.",
          columns: [
            { key: "job", label: "Job", value: (j) => j.job, cell: (j) => link(`/jobs/${encodeURIComponent(j.job)}`, j.job) },
            { key: "user", label: "User", value: (j) => j.user ?? "" },
            { key: "state", label: "State", value: (j) => j.state ?? "" },
            { key: "bytes", label: "Bytes while erring", value: (j) => j.bytes, cell: (j) => n(j.bytes), numeric: true },
            { key: "spans", label: "Spans", value: (j) => j.spans, cell: (j) => n(j.spans), numeric: true },
          ],
        }),
      );
      detail.replaceChildren(h("p", {}, link(`/links/${id}`, `link ${id}`)), frame, dirs, hurtBox);
      drawChart(frame, { title: "BER", time: times, lines, format: ber, axisFormat: ber, unit: "bit error rate" }, signal);
    } catch (err) {
      if (signal.aborted) return;
      detail.replaceChildren(failure(err));
    }
  };

  try {
    // ?limit= asks the daemon for fewer directions (the riskiest); the
    // ranking then says the list was cut.
    const asked = Number.parseInt(search.get("limit") ?? "", 10);
    const r = await get<HealthResponse>("/health", { window, limit: asked >= 1 && asked <= 1000 ? asked : 1000 }, signal);
    const c = r.counts;
    // Every status's count, clean and no history included: they add up to
    // the directions.
    summary.textContent = `${n(r.links)} links (${n(r.total)} directions) over the last ${window}, BER limit ${ber(r.ber_limit)}: ${n(c.rising ?? 0)} rising, ${n(c.over_limit ?? 0)} over the limit, ${n(c.retrained ?? 0)} retrained, ${n(c.errors ?? 0)} with errors, ${n(c.clean ?? 0)} clean, ${n(c.no_history ?? 0)} with no history (no counter sample in the window); ${n(r.degraded.length)} degraded.`;
    const shown = r.directions.filter((d) => d.status !== "clean" && d.status !== "no_history");
    // What the ranking lists, and whether the daemon's list was cut.
    const listed = r.truncated
      ? `The daemon listed the riskiest ${n(r.directions.length)} of the ${n(r.total)} directions; ranked below: ${n(shown.length)} of them with errors or retrains.`
      : `Ranked below: the ${n(shown.length)} direction${shown.length === 1 ? "" : "s"} with errors or retrains; clean and no-history ones are counted above.`;
    ranked.replaceChildren(
      h("p", { class: "panel-note health-listed", "data-total": String(r.total), "data-listed": String(r.directions.length), "data-shown": String(shown.length) }, listed),
      table({
        label: "Link directions by risk",
        rows: shown.map((d, i) => ({ ...d, rank: i + 1 })),
        param: "r",
        defaultSort: "rank",
        defaultDir: "asc",
        pageSize: 25,
        empty: "No link direction counted errors in the window.",
        rowClass: (d) => `health-row status-${d.status}`,
        columns: [
          { key: "rank", label: "#", value: (d) => d.rank, numeric: true },
          { key: "risk", label: "Risk", value: (d) => d.risk, cell: (d) => risk(d.risk), numeric: true },
          { key: "status", label: "Status", value: (d) => d.status, cell: (d) => h("span", { class: statusClass(d.status) }, d.status) },
          { key: "trend", label: "Trend", value: (d) => d.trend },
          { key: "ber_now", label: "BER now", value: (d) => d.ber_now, cell: (d) => ber(d.ber_now), numeric: true },
          { key: "symbol", label: "Symbol errors", value: (d) => d.symbol_errors, cell: (d) => n(d.symbol_errors), numeric: true },
          { key: "prediction", label: "Prediction", value: (d) => d.prediction?.in_seconds ?? Infinity, cell: (d) => predictionText(d.prediction) },
          {
            key: "dir",
            label: "Direction",
            value: (d) => dirName(d),
            cell: (d) =>
              h(
                "a",
                {
                  href: `/health?link=${d.link}`,
                  "data-link": d.link,
                  "data-to": `${d.to.guid}:${d.to.port}`,
                  onclick: (e: Event) => {
                    e.preventDefault();
                    void showLink(d.link);
                  },
                },
                dirName(d),
              ),
          },
        ],
      }),
    );
    degraded.replaceChildren(
      r.degraded.length === 0
        ? empty("No degraded link: every link runs at its peers' width and speed.")
        : h(
            "div",
            {},
            ...r.degraded.map((d) =>
              h(
                "div",
                { class: "degraded", "data-link": d.link },
                h("p", {}, h("span", { class: "badge warn" }, fmt.linkRate(d)), " ", link(`/links/${d.link}`, `${portName(d.a_node, d.a, d.a_name)} – ${portName(d.b_node, d.b, d.b_name)}`), ": ", h("span", { "data-field": "reason" }, d.reason)),
                jobsTable(`Jobs crossing ${d.link}`, d.jobs, `d${d.link.slice(-6)}`, "No running job's route crosses it."),
              ),
            ),
          ),
    );
    const first = search.get("link") ?? shown[0]?.link;
    if (first) void showLink(first);
    const ik = search.get("impact_kind");
    if (ik && ["link", "switch", "nodes"].includes(ik)) {
      kind.value = ik;
      what.value = search.get("impact") ?? "";
      void ask();
    }
  } catch (err) {
    if (signal.aborted) return;
    ranked.replaceChildren(failure(err));
    degraded.replaceChildren(failure(err));
  }
}

function loadText(d: DirLoad | null): string {
  return d ? `${dirName(d)}: ${n(d.bytes)} bytes (${fmt.pct(d.utilization_pct)})` : "none (no traffic)";
}

function impactView(im: Impact): HTMLElement {
  return h(
    "div",
    { class: "impact" },
    h("p", {}, h("strong", { "data-field": "target" }, im.target.name), ": ", h("span", { "data-field": "state" }, im.state), im.down_since ? ` since ${fmt.time(im.down_since)}` : ""),
    h("p", { class: "note" }, h("span", { class: "badge", "data-field": "route_model" }, im.route_model), " ", h("span", { "data-field": "route_note" }, im.route_note)),
    h("p", { class: "note", "data-field": "traffic_note" }, im.traffic_note),
    jobsTable("Running jobs whose routes cross it", im.jobs, "i", "No running job's route crosses it."),
    h(
      "dl",
      { class: "kv" },
      h("dt", {}, "Bytes moved"),
      h("dd", { "data-field": "moved_bytes" }, n(im.moved_bytes)),
      h("dt", {}, "Bytes left without a route"),
      h("dd", { "data-field": "unroutable_bytes" }, n(im.unroutable_bytes)),
      h("dt", {}, "Heaviest direction before"),
      h("dd", { "data-field": "heaviest_before" }, loadText(im.heaviest_before)),
      h("dt", {}, "Heaviest direction after"),
      h("dd", { "data-field": "heaviest_after" }, loadText(im.heaviest_after)),
    ),
    table({
      label: "Directions taken out",
      rows: im.removed,
      param: "x",
      defaultSort: "bytes",
      pageSize: 20,
      empty: "No direction is taken out.",
      columns: [
        { key: "dir", label: "Direction taken out", value: (d) => dirName(d) },
        { key: "bytes", label: "Bytes in the window", value: (d) => d.bytes, cell: (d) => n(d.bytes), numeric: true },
      ],
    }),
    table({
      label: "Directions whose load changes",
      rows: im.changes,
      param: "c",
      defaultSort: "delta",
      pageSize: 20,
      empty: "No remaining direction's load changes.",
      columns: [
        { key: "dir", label: "Direction", value: (c) => dirName(c) },
        { key: "before", label: "Bytes before", value: (c) => c.bytes_before, cell: (c) => n(c.bytes_before), numeric: true },
        { key: "after", label: "Bytes after", value: (c) => c.bytes_after, cell: (c) => n(c.bytes_after), numeric: true },
        { key: "delta", label: "Change", value: (c) => Math.abs(c.delta_bytes), cell: (c) => (c.delta_bytes > 0 ? "+" : "") + n(c.delta_bytes), numeric: true },
      ],
    }),
    ...(im.errors ?? []).map((e) => h("p", { class: "state error" }, e)),
  );
}
