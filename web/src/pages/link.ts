// The link page: both directions now and over time, in bytes/s and as a
// share of capacity, errors and transmit wait at each end, its traffic by
// job, and the routes that cross the link each way. A regular user reaches
// only links their jobs' traffic crosses: they get the traffic and the
// by-job split (other users' jobs anonymized), not the routes or node pages.
import type { FabricNode, LinkCounters, LinkResponse, LinkRoutes, Series } from "../api";
import { ApiError, get, isAdmin, nodesAt } from "../api";
import { linkJobs } from "../jobs/linkjobs";
import { chartError, chartFrame, drawChart, PALETTE } from "../chart";
import { h, link, loading, metric, panel } from "../dom";
import * as fmt from "../format";
import { portLabel, portOnly } from "../ports";
import { refreshOnSweep } from "../live";
import type { PageContext } from "../router";
import { table } from "../table";
import { atParams, readTime, rangeParams, timeQuery } from "../time";

const COUNTERS = "xmit_data_bytes,rcv_data_bytes,xmit_wait,errors";

export async function linkPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal } = ctx;
  const id = ctx.params.id!;
  const title = h("h1", {}, "Link");
  const sub = h("p", { class: "sub" }, "\u00a0");
  const cards = h("div", { class: "cards" }, loading());
  const charts = {
    bytes: chartFrame("Traffic per direction"),
    pct: chartFrame("Utilization, % of capacity"),
    errors: chartFrame("Errors received per interval"),
    wait: chartFrame("Transmit wait per interval (ticks)"),
  };
  const admin = isAdmin();
  const routes = h("div", { class: "routes" }, loading("Loading routes…"));
  const jobs = linkJobs(id, t, signal);
  const nodeName = (guid: string, name: string) => (admin ? link(`/nodes/${guid}${timeQuery(t)}`, name) : name);
  root.append(
    h("div", { class: "page-head" }, h("nav", { class: "crumbs" }, admin ? link(`/network${timeQuery(t)}`, "Network") : link(`/jobs${timeQuery(t)}`, "Jobs"), " / link"), title, sub),
    cards,
    h("div", { class: "grid2" }, charts.bytes, charts.pct, charts.errors, charts.wait),
    panel("Traffic by job", jobs.el),
    ...(admin ? [panel("Routes crossing this link", routes)] : []),
  );

  const loadNow = async () => {
    const r = await get<LinkResponse>(`/links/${encodeURIComponent(id)}`, atParams(t), signal);
    const l = r.link;
    title.textContent = `${portLabel(r.directions[0].from_description, l.a.port, l.a_name)} ↔ ${portLabel(r.directions[0].to_description, l.b.port, l.b_name)}`;
    sub.replaceChildren(
      `${fmt.linkRate(l)} · ${l.state} · capacity ${fmt.rate(l.capacity_bytes_per_second)} each way · `,
      h("code", {}, l.id),
    );
    cards.replaceChildren(
      ...r.directions.map((d) =>
        h(
          "div",
          { class: "card" },
          h(
            "div",
            { class: "card-title" },
            nodeName(d.from.guid, d.from_description),
            ` ${portOnly(d.from.port, d.from_name)}${d.from_name ? ` (port ${d.from.port})` : ""} → `,
            nodeName(d.to.guid, d.to_description),
            ` ${portOnly(d.to.port, d.to_name)}${d.to_name ? ` (port ${d.to.port})` : ""}`,
          ),
          d.measured
            ? h(
                "div",
                { class: "metrics" },
                metric("Rate", fmt.rate(d.bytes_per_second)),
                metric("Utilization", fmt.pct(d.utilization_pct), d.utilization_pct >= 80 ? "hot" : ""),
                metric("Transmit wait", fmt.count(d.xmit_wait)),
                metric("Errors", fmt.count(d.errors), d.errors > 0 ? "bad" : ""),
              )
            : h("div", { class: "state empty" }, "Not measured at this time."),
          // These are one sweep's figures; a job's table and "Traffic by
          // job" below are over a range: say which, so that a direction
          // busy over a job's life and idle now does not read as a
          // contradiction.
          h("p", { class: "card-note dim-text", "data-window": "sweep" }, `In the sweep before ${fmt.time(r.at)}; the traffic by job below is over the range it names.`),
        ),
      ),
    );
    return r;
  };
  let first: LinkResponse;
  try {
    first = await loadNow();
  } catch (err) {
    // A user asking for a link none of their jobs crosses: the daemon
    // answers as if it did not exist (or forbids it).
    if (admin || !(err instanceof ApiError) || (err.status !== 403 && err.status !== 404)) throw err;
    root.replaceChildren(
      h(
        "div",
        { class: "notice-box", role: "status", "data-state": "not-yours" },
        h("h1", {}, "Not a link your jobs use"),
        h("p", {}, "You can see the links your own jobs' traffic crosses; this one is not among them, or it does not exist."),
        h("p", {}, link(`/jobs${timeQuery(t)}`, "Go to your jobs")),
      ),
    );
    return;
  }

  const loadSeries = async () => {
    try {
      const c = await get<LinkCounters>(`/links/${encodeURIComponent(id)}/counters`, { ...rangeParams(t), counters: COUNTERS }, signal);
      const [a, b] = c.series;
      const cap = c.link.capacity_bytes_per_second;
      const names = [first.directions[0].from_description, first.directions[0].to_description];
      const { time, col } = align([a, b]);
      const ab = a.time.length ? col(0, "rate", "xmit_data_bytes") : col(1, "rate", "rcv_data_bytes");
      const ba = b.time.length ? col(1, "rate", "xmit_data_bytes") : col(0, "rate", "rcv_data_bytes");
      const dirA = `${names[0]} → ${names[1]}`;
      const dirB = `${names[1]} → ${names[0]}`;
      drawChart(charts.bytes, { title: "", time, format: fmt.rate, lines: [{ label: dirA, values: ab, color: PALETTE[0]! }, { label: dirB, values: ba, color: PALETTE[1]! }] }, signal);
      const p = (v: (number | null)[]) => v.map((x) => (x == null || cap <= 0 ? null : (100 * x) / cap));
      drawChart(charts.pct, { title: "", time, format: (v) => fmt.pct(v), yMax: 100, lines: [{ label: dirA, values: p(ab), color: PALETTE[0]! }, { label: dirB, values: p(ba), color: PALETTE[1]! }] }, signal);
      const errs = (k: number) => {
        const s = [a, b][k]!;
        if (!s.time.length) return time.map(() => null);
        const keys = Object.keys(s.delta).filter((n) => !["xmit_data_bytes", "rcv_data_bytes", "xmit_wait"].includes(n));
        return col(k, "delta", "", (i) => keys.reduce((sum, n) => sum + (s.delta[n]![i] ?? 0), 0));
      };
      drawChart(charts.errors, { title: "", time, format: fmt.count, axisFormat: fmt.compact, unit: "errors", lines: [{ label: `at ${names[1]} (from ${names[0]})`, values: errs(1), color: PALETTE[8]! }, { label: `at ${names[0]} (from ${names[1]})`, values: errs(0), color: PALETTE[3]! }] }, signal);
      drawChart(charts.wait, { title: "", time, format: fmt.count, axisFormat: fmt.compact, unit: "ticks", lines: [{ label: `${names[0]} waiting to send`, values: col(0, "delta", "xmit_wait"), color: PALETTE[0]! }, { label: `${names[1]} waiting to send`, values: col(1, "delta", "xmit_wait"), color: PALETTE[1]! }] }, signal);
    } catch (err) {
      if (signal.aborted) return;
      for (const f of Object.values(charts)) chartError(f, err);
    }
  };
  await loadSeries();

  const loadRoutes = async () => {
    try {
      const [r, nodes] = await Promise.all([get<LinkRoutes>(`/links/${encodeURIComponent(id)}/routes`, { ...atParams(t), limit: 500 }, signal), nodesAt(atParams(t))]);
      const byLid = new Map<number, FabricNode>();
      for (const nd of nodes) byLid.set(nd.lid, nd);
      const name = (lid: number) => byLid.get(lid)?.description.split(" ")[0] ?? `LID ${lid}`;
      const guid = (lid: number) => byLid.get(lid)?.guid;
      const parts = r.directions.map((d, k) => {
        const rows = d.pairs.map((p) => ({ src: p.src_lid, dst: p.dst_lid }));
        return h(
          "div",
          { class: "route-dir" },
          h("h3", {}, `${k === 0 ? first.directions[0].from_description + " → " + first.directions[0].to_description : first.directions[1].from_description + " → " + first.directions[1].to_description}: ${fmt.plural(d.total, "route")}${d.total > d.pairs.length ? ` (first ${d.pairs.length} shown)` : ""}`),
          table({
            label: `Routes ${k === 0 ? "A to B" : "B to A"}`,
            param: k === 0 ? "ra" : "rb",
            rows,
            defaultSort: "src",
            defaultDir: "asc",
            pageSize: 20,
            empty: "No route crosses the link this way.",
            columns: [
              { key: "src", label: "Source", value: (x) => name(x.src), cell: (x) => nodeLink(guid(x.src), name(x.src), t) },
              { key: "srclid", label: "LID", value: (x) => x.src, numeric: true },
              { key: "dst", label: "Destination", value: (x) => name(x.dst), cell: (x) => nodeLink(guid(x.dst), name(x.dst), t) },
              { key: "dstlid", label: "LID", value: (x) => x.dst, numeric: true },
            ],
          }),
        );
      });
      routes.replaceChildren(h("div", { class: "grid2" }, ...parts));
    } catch (err) {
      if (signal.aborted) return;
      routes.replaceChildren(h("div", { class: "state empty" }, `Routes unavailable: ${err instanceof Error ? err.message : String(err)}`));
    }
  };
  await Promise.all([admin ? loadRoutes() : null, jobs.load()]);

  if (t.mode === "live") refreshOnSweep(() => void loadNow().then(loadSeries).then(jobs.load), signal, 5000);
}

function nodeLink(guid: string | undefined, name: string, t: ReturnType<typeof readTime>): Node | string {
  return guid ? link(`/nodes/${guid}${timeQuery(t)}`, name) : name;
}

/** Aligns several port series on one time axis (union of their times). */
export function align(series: Series[]): {
  time: number[];
  col: (k: number, kind: "rate" | "delta", counter: string, f?: (i: number) => number) => (number | null)[];
} {
  const set = new Set<number>();
  for (const s of series) for (const x of s.time) set.add(x);
  const time = [...set].sort((a, b) => a - b);
  const pos = new Map(time.map((x, i) => [x, i]));
  return {
    time,
    col: (k, kind, counter, f) => {
      const out: (number | null)[] = time.map(() => null);
      const s = series[k]!;
      const vals = s[kind][counter];
      s.time.forEach((x, i) => {
        const v = f ? f(i) : vals?.[i];
        if (v !== undefined) out[pos.get(x)!] = v;
      });
      return out;
    },
  };
}
