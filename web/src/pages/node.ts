// The node page: every port with its peer and latest rates, and the
// node's counters over time.
import type { NodeCounters, NodePort, NodeResponse } from "../api";
import { ERROR_COUNTERS, get } from "../api";
import { chartError, chartFrame, drawChart, PALETTE } from "../chart";
import { h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import { refreshOnSweep } from "../live";
import type { PageContext } from "../router";
import { table } from "../table";
import { atParams, readTime, rangeParams, timeQuery } from "../time";
import { align, metric } from "./link";

export async function nodePage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal } = ctx;
  const key = ctx.params.node!;
  const title = h("h1", {}, key);
  const sub = h("p", { class: "sub" }, "\u00a0");
  const cards = h("div", { class: "cards one" }, loading());
  const ports = h("div", {}, loading("Loading ports…"));
  const charts = { xmit: chartFrame("Transmit per port"), rcv: chartFrame("Receive per port"), errors: chartFrame("Errors per interval, all ports"), wait: chartFrame("Transmit wait per interval, all ports") };
  root.append(
    h("div", { class: "page-head" }, h("nav", { class: "crumbs" }, link(`/network${timeQuery(t)}`, "Network"), " / node"), title, sub),
    cards,
    panel("Ports", ports),
    h("div", { class: "grid2" }, charts.xmit, charts.rcv, charts.errors, charts.wait),
  );

  const loadNow = async () => {
    const r = await get<NodeResponse>(`/nodes/${encodeURIComponent(key)}`, atParams(t), signal);
    const n = r.node;
    title.textContent = n.description;
    sub.replaceChildren(`${n.type === "switch" ? "Switch" : n.type === "ca" ? "Host channel adapter" : "Router"}${n.fabric ? ` · fabric ${n.fabric}` : ""} · GUID `, h("code", {}, n.guid), ` · LID ${n.lid} · ${n.ports} ports`);
    const linked = r.ports.filter((p) => p.link);
    const rate = (p: NodePort, c: string) => p.rates?.[c] ?? NaN;
    const errs = (p: NodePort) => (p.rates ? ERROR_COUNTERS.reduce((s, c) => s + (p.rates![c] ?? 0), 0) : NaN);
    const util = (p: NodePort) => (p.link && p.rates ? (100 * rate(p, "xmit_data_bytes")) / p.link.capacity_bytes_per_second : NaN);
    const totalOut = linked.reduce((s, p) => s + (rate(p, "xmit_data_bytes") || 0), 0);
    const totalIn = linked.reduce((s, p) => s + (rate(p, "rcv_data_bytes") || 0), 0);
    cards.replaceChildren(
      h(
        "div",
        { class: "card" },
        h(
          "div",
          { class: "metrics" },
          metric("Linked ports", `${linked.length} of ${n.ports}`),
          metric("Transmit", fmt.rate(totalOut)),
          metric("Receive", fmt.rate(totalIn)),
          metric("Errors/s", fmt.count(linked.reduce((s, p) => s + (errs(p) || 0), 0)), linked.some((p) => errs(p) > 0) ? "bad" : ""),
          metric("Unreachable ports", String(r.ports.filter((p) => p.unreachable).length)),
        ),
      ),
    );
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
          { key: "port", label: "Port", value: (p) => p.port, numeric: true },
          { key: "peer", label: "Peer", value: (p) => p.peer_description ?? "", cell: (p) => (p.peer ? link(`/nodes/${p.peer.guid}${timeQuery(t)}`, `${p.peer_description ?? p.peer.guid}`, ` port ${p.peer.port}`) : "—") },
          { key: "link", label: "Link", value: (p) => (p.link ? `${p.link.width} ${p.link.speed}` : ""), cell: (p) => (p.link ? link(`/links/${p.link.id}${timeQuery(t)}`, `${p.link.width} ${p.link.speed}`) : "not connected") },
          { key: "out", label: "Out", value: (p) => rate(p, "xmit_data_bytes"), cell: (p) => fmt.rate(rate(p, "xmit_data_bytes")), numeric: true },
          { key: "in", label: "In", value: (p) => rate(p, "rcv_data_bytes"), cell: (p) => fmt.rate(rate(p, "rcv_data_bytes")), numeric: true },
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
      const { time, col } = align(withData);
      const perPort = (counter: string) =>
        withData.slice(0, 40).map((s, k) => ({ label: `port ${s.port.port}`, values: col(k, "rate", counter), color: PALETTE[k % PALETTE.length]!, dash: k >= PALETTE.length ? [4, 3] : undefined }));
      drawChart(charts.xmit, { title: "", time, format: fmt.rate, lines: perPort("xmit_data_bytes") }, signal);
      drawChart(charts.rcv, { title: "", time, format: fmt.rate, lines: perPort("rcv_data_bytes") }, signal);
      const sum = (f: (s: (typeof withData)[number], i: number) => number) => {
        const out: (number | null)[] = time.map(() => 0);
        const pos = new Map(time.map((x, i) => [x, i]));
        for (const s of withData) s.time.forEach((x, i) => (out[pos.get(x)!] = (out[pos.get(x)!] ?? 0) + f(s, i)));
        return out;
      };
      drawChart(charts.errors, { title: "", time, format: fmt.count, axisFormat: fmt.compact, lines: [{ label: "errors", values: sum((s, i) => ERROR_COUNTERS.reduce((a, n) => a + (s.delta[n]?.[i] ?? 0), 0)), color: PALETTE[8]! }] }, signal);
      drawChart(charts.wait, { title: "", time, format: fmt.count, axisFormat: fmt.compact, lines: [{ label: "transmit wait", values: sum((s, i) => s.delta["xmit_wait"]?.[i] ?? 0), color: PALETTE[3]! }] }, signal);
    } catch (err) {
      if (signal.aborted) return;
      for (const f of Object.values(charts)) chartError(f, err);
    }
  };
  await loadSeries();
  if (t.mode === "live") refreshOnSweep(() => void loadNow().then(loadSeries), signal, 5000);
}
