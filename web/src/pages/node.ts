// The node page: every port with its peer and latest rates, and the
// node's counters over time. A linked port without rates of its own (a
// host adapter the daemon does not sweep, a port that did not answer) says
// why and how to fill it, and shows its link's traffic as the other end
// measured it, labelled so. Ports go by the names their fabric gives them
// (an Ethernet interface, "swp1"), their numbers beside; InfiniBand's by
// number. Then the jobs that ran on the node over the page's range
// (GET /nodes/{node}/jobs), each linked to its page.
import type { FabricNode, NodeCounters, NodePort, NodeResponse, PortCounters, Series } from "../api";
import { ERROR_COUNTERS, get } from "../api";
import { chartError, chartFrame, drawChart, PALETTE } from "../chart";
import { h, link, loading, metric, panel } from "../dom";
import * as fmt from "../format";
import type { JobSummary } from "../jobs/api";
import { duration, stateBadge } from "../jobs/state";
import { portOnly } from "../ports";
import { refreshOnSweep } from "../live";
import type { PageContext } from "../router";
import { table } from "../table";
import { atParams, readTime, rangeParams, timeQuery } from "../time";
import { align } from "./link";

export async function nodePage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal } = ctx;
  const key = ctx.params.node!;
  const title = h("h1", {}, key);
  const sub = h("p", { class: "sub" }, "\u00a0");
  const cards = h("div", { class: "cards one" }, loading());
  const ports = h("div", {}, loading("Loading ports…"));
  const jobs = h("div", { class: "node-jobs" }, loading("Loading jobs…"));
  const notes = h("div", { class: "no-rates-notes" });
  const charts = { xmit: chartFrame("Transmit per port"), rcv: chartFrame("Receive per port"), errors: chartFrame("Errors per interval, all ports"), wait: chartFrame("Transmit wait per interval, all ports") };
  root.append(
    h("div", { class: "page-head" }, h("nav", { class: "crumbs" }, link(`/network${timeQuery(t)}`, "Network"), " / node"), title, sub),
    notes,
    cards,
    panel("Ports", ports),
    panel("Jobs on this node", jobs),
    h("div", { class: "grid2" }, charts.xmit, charts.rcv, charts.errors, charts.wait),
  );

  // Ports whose link traffic comes from the other end (no rates of their own).
  let borrowed: NodePort[] = [];
  let endName = "other end";

  const loadNow = async () => {
    const r = await get<NodeResponse>(`/nodes/${encodeURIComponent(key)}`, atParams(t), signal);
    const n = r.node;
    // A node linked at Ethernet rates is on an Ethernet fabric: a host
    // there is an LLDP neighbour, not an InfiniBand channel adapter.
    const eth = r.ports.some((p) => p.link && fmt.isEthernetSpeed(p.link.speed));
    title.textContent = n.description;
    sub.replaceChildren(`${n.type === "switch" ? "Switch" : n.type === "ca" ? (eth ? "Host" : "Host channel adapter") : "Router"}${n.fabric ? ` · fabric ${n.fabric}` : ""} · GUID `, h("code", {}, n.guid), ` · LID ${n.lid} · ${fmt.plural(n.ports, "port")}`);
    const linked = r.ports.filter((p) => p.link);
    endName = n.type === "ca" ? "switch end" : "other end";
    borrowed = linked.filter((p) => !p.rates && p.peer_rates);
    // This port's transmit is what the other end received, and the reverse.
    const out = (p: NodePort) => p.rates?.xmit_data_bytes ?? p.peer_rates?.rcv_data_bytes ?? NaN;
    const inn = (p: NodePort) => p.rates?.rcv_data_bytes ?? p.peer_rates?.xmit_data_bytes ?? NaN;
    const rate = (p: NodePort, c: string) => p.rates?.[c] ?? NaN;
    const errs = (p: NodePort) => (p.rates ? ERROR_COUNTERS.reduce((s, c) => s + (p.rates![c] ?? 0), 0) : NaN);
    const util = (p: NodePort) => (p.link ? (100 * out(p)) / p.link.capacity_bytes_per_second : NaN);
    const measured = linked.filter((p) => Number.isFinite(out(p)));
    const sum = (ps: NodePort[], f: (p: NodePort) => number) => (ps.length ? ps.reduce((s, p) => s + f(p), 0) : NaN);
    const own = linked.filter((p) => p.rates);
    const where = borrowed.length ? (own.length ? ` (${borrowed.length === 1 ? "a port" : "some ports"} at the ${endName})` : ` (at the ${endName})`) : "";
    notes.replaceChildren(...noRatesNotes(n, linked, endName, eth));
    cards.replaceChildren(
      h(
        "div",
        { class: "card" },
        h(
          "div",
          { class: "metrics" },
          metric("Linked ports", `${linked.length} of ${n.ports}`),
          metric(`Transmit${where}`, fmt.rate(sum(measured, out))),
          metric(`Receive${where}`, fmt.rate(sum(measured, inn))),
          metric("Errors/s", fmt.count(sum(own, errs)), own.some((p) => errs(p) > 0) ? "bad" : ""),
          metric("Unreachable ports", String(r.ports.filter((p) => p.unreachable).length)),
        ),
      ),
    );
    // Ports the fabric names (Ethernet): the name, its number beside.
    const named = r.ports.some((p) => p.name);
    const portCell = (p: NodePort) => (p.name ? h("span", { class: "port-name", title: `port ${p.port}` }, p.name, h("span", { class: "dim-text" }, ` · ${p.port}`)) : String(p.port));
    const rateCell = (p: NodePort, v: number) =>
      p.rates || !Number.isFinite(v) ? fmt.rate(v) : h("span", { class: "peer-measured", title: `Measured at the ${endName} of the link: this port's own counters are not read` }, fmt.rate(v), h("span", { class: "dim-text" }, ` · ${endName}`));
    ports.replaceChildren(
      table({
        label: "Ports",
        rows: r.ports,
        defaultSort: "port",
        defaultDir: "asc",
        pageSize: 64,
        empty: "This node has no ports.",
        rowClass: (p) => (!p.link ? "dim" : p.unreachable ? "bad" : ""),
        columns: [
          { key: "port", label: "Port", value: (p) => p.port, cell: portCell, numeric: !named },
          {
            key: "peer",
            label: "Peer",
            value: (p) => p.peer_description ?? "",
            cell: (p) => (p.peer ? link(`/nodes/${p.peer.guid}${timeQuery(t)}`, `${p.peer_description ?? p.peer.guid}`, ` ${portOnly(p.peer.port, p.peer_name)}`) : "—"),
          },
          { key: "link", label: "Link", value: (p) => (p.link ? fmt.linkRate(p.link) : ""), cell: (p) => (p.link ? link(`/links/${p.link.id}${timeQuery(t)}`, fmt.linkRate(p.link)) : "not connected") },
          { key: "out", label: "Out", value: out, cell: (p) => rateCell(p, out(p)), numeric: true },
          { key: "in", label: "In", value: inn, cell: (p) => rateCell(p, inn(p)), numeric: true },
          { key: "util", label: "Out %", value: util, cell: (p) => fmt.pct(util(p)), numeric: true, title: "Transmit rate as a share of the link's capacity" },
          { key: "wait", label: "Wait/s", value: (p) => rate(p, "xmit_wait"), cell: (p) => fmt.count(rate(p, "xmit_wait")), numeric: true, title: "Transmit wait ticks per second" },
          { key: "errors", label: "Errors/s", value: errs, cell: (p) => fmt.count(errs(p)), numeric: true },
          { key: "state", label: "State", value: (p) => (p.unreachable ? "unreachable" : p.link?.state ?? ""), cell: (p) => (p.unreachable ? h("span", { class: "badge bad" }, "unreachable") : p.link ? h("span", { class: "badge" }, p.link.state) : "") },
        ],
      }),
    );
    return r;
  };
  await loadNow();

  const loadSeries = async () => {
    try {
      const c = await get<NodeCounters>(`/nodes/${encodeURIComponent(key)}/counters`, { ...rangeParams(t), counters: "xmit_data_bytes,rcv_data_bytes,xmit_wait,errors" }, signal);
      const withData = c.series.filter((s) => s.time.length);
      // Ports without samples of their own: their link's traffic as the
      // other end counted it, its receive as this port's transmit.
      const own = new Set(withData.map((s) => s.port.port));
      const others = await Promise.all(
        borrowed
          .filter((p) => !own.has(p.port))
          .map(async (p) => {
            const o = await get<PortCounters>(`/ports/${p.peer!.guid}:${p.peer!.port}/counters`, { ...rangeParams(t), counters: "xmit_data_bytes,rcv_data_bytes" }, signal);
            const s: Series = { ...o.series, port: { guid: c.node.guid, port: p.port }, rate: { xmit_data_bytes: o.series.rate.rcv_data_bytes ?? [], rcv_data_bytes: o.series.rate.xmit_data_bytes ?? [] } };
            return s;
          }),
      );
      const traffic = [...withData, ...others.filter((s) => s.time.length)];
      const label = (s: Series) => `${portOnly(s.port.port, c.node.port_names?.[s.port.port])}${own.has(s.port.port) ? "" : ` (${endName})`}`;
      const { time: ttime, col: tcol } = align(traffic);
      const perPort = (counter: string) =>
        traffic.slice(0, 40).map((s, k) => ({ label: label(s), values: tcol(k, "rate", counter), color: PALETTE[k % PALETTE.length]!, dash: k >= PALETTE.length ? [4, 3] : undefined }));
      drawChart(charts.xmit, { title: "", time: ttime, format: fmt.rate, lines: perPort("xmit_data_bytes") }, signal);
      drawChart(charts.rcv, { title: "", time: ttime, format: fmt.rate, lines: perPort("rcv_data_bytes") }, signal);
      const { time } = align(withData);
      const sum = (f: (s: (typeof withData)[number], i: number) => number) => {
        const out: (number | null)[] = time.map(() => 0);
        const pos = new Map(time.map((x, i) => [x, i]));
        for (const s of withData) s.time.forEach((x, i) => (out[pos.get(x)!] = (out[pos.get(x)!] ?? 0) + f(s, i)));
        return out;
      };
      drawChart(charts.errors, { title: "", time, format: fmt.count, axisFormat: fmt.compact, unit: "errors", lines: [{ label: "errors", values: sum((s, i) => ERROR_COUNTERS.reduce((a, n) => a + (s.delta[n]?.[i] ?? 0), 0)), color: PALETTE[8]! }] }, signal);
      drawChart(charts.wait, { title: "", time, format: fmt.count, axisFormat: fmt.compact, unit: "ticks", lines: [{ label: "transmit wait", values: sum((s, i) => s.delta["xmit_wait"]?.[i] ?? 0), color: PALETTE[3]! }] }, signal);
      if (!withData.length && borrowed.length) {
        // The other end's series carry traffic, not this node's errors or waits.
        for (const f of [charts.errors, charts.wait]) {
          f.querySelector(".chart-body")!.replaceChildren(h("div", { class: "state empty" }, "Not known: this node's own counters are not read (see above)."));
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      for (const f of Object.values(charts)) chartError(f, err);
    }
  };
  await loadSeries();
  const loadJobs = () => nodeJobs(jobs, key, t, signal).catch((err) => {
    if (!signal.aborted) jobs.replaceChildren(h("div", { class: "state error" }, `Could not load the node's jobs: ${err instanceof Error ? err.message : String(err)}`));
  });
  await loadJobs();
  if (t.mode === "live") refreshOnSweep(() => void loadNow().then(loadSeries).then(loadJobs), signal, 5000);
}

/** A job as GET /nodes/{node}/jobs lists it: with its ranks on the node. */
interface NodeJob extends JobSummary {
  ranks_on_node: number;
  node_names: string[];
}

interface NodeJobs {
  node: string;
  names: string[];
  from: string;
  to: string;
  scanned: number;
  scan_truncated: boolean;
  total: number;
  limit: number;
  truncated: boolean;
  jobs: NodeJob[];
}

/** The jobs that ran on the node over the page's range (live: the last
 * 24 hours; at a past time: those running then), each with its time range
 * and a link to its page. */
async function nodeJobs(el: HTMLElement, key: string, t: ReturnType<typeof readTime>, signal: AbortSignal): Promise<void> {
  const params: Record<string, string> = t.mode === "range" ? { from: String(t.from), to: String(t.to) } : t.mode === "at" ? { from: String(t.at), to: String(t.at) } : { from: "-24h" };
  const r = await get<NodeJobs>(`/nodes/${encodeURIComponent(key)}/jobs`, { ...params, limit: "200" }, signal);
  const when = t.mode === "live" ? "in the last 24 hours" : t.mode === "at" ? `running at ${fmt.time(r.to)}` : `between ${fmt.time(r.from)} and ${fmt.time(r.to)}`;
  const q = timeQuery(t);
  el.replaceChildren(
    h(
      "p",
      { class: "panel-note node-jobs-summary" },
      `${fmt.plural(r.total, "job")} ran on ${r.node} ${when}`,
      r.truncated ? ` (the newest ${fmt.count(r.jobs.length)} shown)` : "",
      r.scan_truncated ? ` among the newest ${fmt.plural(r.scanned, "job")} of the range; older ones are not searched` : "",
      ".",
    ),
    table({
      label: "Jobs on this node",
      rows: r.jobs,
      defaultSort: "start",
      pageSize: 20,
      param: "nj",
      empty: `No job ran on ${r.node} ${when}.`,
      columns: [
        { key: "id", label: "Job", value: (j: NodeJob) => j.id, cell: (j: NodeJob) => link(`/jobs/${encodeURIComponent(j.id)}${q}`, j.id) },
        { key: "user", label: "User", value: (j: NodeJob) => j.user ?? "" },
        { key: "state", label: "State", value: (j: NodeJob) => j.state, cell: stateBadge },
        { key: "ranks", label: "Ranks here", value: (j: NodeJob) => j.ranks_on_node, cell: (j: NodeJob) => `${fmt.count(j.ranks_on_node)} of ${fmt.count(j.ranks)}`, numeric: true },
        { key: "start", label: "Started", value: (j: NodeJob) => Date.parse(j.start), cell: (j: NodeJob) => h("time", { datetime: j.start }, fmt.time(j.start)) },
        { key: "end", label: "Ended", value: (j: NodeJob) => (j.end ? Date.parse(j.end) : Infinity), cell: (j: NodeJob) => (j.end ? h("time", { datetime: j.end }, fmt.time(j.end)) : "running") },
        { key: "duration", label: "Duration", value: (j: NodeJob) => j.duration_seconds, cell: (j: NodeJob) => duration(j.duration_seconds), numeric: true },
      ],
    }),
  );
}

/** What a page says about linked ports without rates of their own: why,
 * and how to fill them. */
function noRatesNotes(n: FabricNode, linked: NodePort[], endName: string, eth: boolean): HTMLElement[] {
  const ports = (ps: NodePort[]) => (ps.length === 1 ? (ps[0]!.name ? `Port ${ps[0]!.name} (${ps[0]!.port})` : `Port ${ps[0]!.port}`) : `Ports ${ps.map((p) => (p.name ? `${p.name} (${p.port})` : p.port)).join(", ")}`);
  const peers = (ps: NodePort[]) => ps.filter((p) => p.peer_rates).map((p) => `${p.peer_description ?? p.peer?.guid} ${portOnly(p.peer?.port ?? 0, p.peer_name)}`);
  const out: HTMLElement[] = [];
  const by = (why: NodePort["no_rates"]) => linked.filter((p) => !p.rates && p.no_rates === why);
  const notSwept = by("not_swept");
  if (notSwept.length) {
    const seen = peers(notSwept);
    out.push(
      h(
        "p",
        { class: "no-rates", role: "note", "data-reason": "not_swept" },
        h("strong", {}, n.type === "ca" ? `This ${eth ? "host" : "adapter"}'s own counters are not read: ` : `${ports(notSwept)}: not read: `),
        "the daemon sweeps switch ports only. ",
        seen.length ? `Its link traffic here is measured at the ${endName} (${seen.join(", ")}): what that port received from this ${n.type === "ca" ? "host" : "node"} is shown as its transmit, what it sent as its receive; the ${eth ? "host" : "adapter"}'s own errors and transmit wait are not known. ` : "",
        // On Ethernet the switches are the SNMP agents; hosts are only
        // their LLDP neighbours, so --sweep-ca-ports reads nothing more
        // there (docs/ethernet.md, "Counters").
        ...(eth
          ? ["On an Ethernet fabric a host is a switch's LLDP neighbour, not an SNMP agent: its own counters cannot be read, the switch port facing it counts its traffic."]
          : [
              "To read adapter ports too, run ",
              h("code", {}, "netloom serve --sweep-ca-ports"),
              " (or set ",
              h("code", {}, "sweep_ca_ports: true"),
              "): at Stampede size a sweep then takes about a quarter longer and the port samples stored grow about 2.4 times (bench/README.md).",
            ]),
      ),
    );
  }
  const unreachable = by("unreachable");
  if (unreachable.length) {
    out.push(h("p", { class: "no-rates", role: "note", "data-reason": "unreachable" }, `${ports(unreachable)} did not answer the last sweep (see Events).${peers(unreachable).length ? ` The link traffic shown is measured at the ${endName}.` : ""}`));
  }
  const first = by("first_sweep");
  if (first.length) {
    out.push(h("p", { class: "no-rates", role: "note", "data-reason": "first_sweep" }, `${ports(first)} read once so far: a rate needs two sweeps.`));
  }
  const none = by("no_sample");
  if (none.length) {
    out.push(h("p", { class: "no-rates", role: "note", "data-reason": "no_sample" }, `${ports(none)}: no sample at this time${peers(none).length ? `; the link traffic shown is measured at the ${endName}` : ""}.`));
  }
  return out;
}
