// The errors page: ports whose error counters rose in the time range, with
// per-counter thresholds marking the ones that need attention.
import type { ErrorPort, ErrorsResponse } from "../api";
import { get } from "../api";
import { h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import { portOnly } from "../ports";
import { refreshOnSweep } from "../live";
import { minFilter } from "../minfilter";
import type { PageContext } from "../router";
import { table } from "../table";
import { DEFAULT_WINDOW_S, readTime, timeQuery } from "../time";

/** Errors in the range at or above which a port needs attention. A
 * physical link problem shows first as symbol errors and link recoveries. */
export const THRESHOLDS: Record<string, number> = {
  symbol_errors: 10,
  link_recovers: 1,
  link_downed: 1,
  rcv_errors: 10,
  rcv_remote_phys_errors: 10,
  rcv_switch_relay_errors: 100,
  xmit_discards: 100,
  xmit_constraint_errors: 1,
  rcv_constraint_errors: 1,
  link_integrity_errors: 1,
  excessive_buffer_overrun_errors: 1,
  vl15_dropped: 100,
};

const over = (p: ErrorPort) => Object.entries(p.counters).filter(([c, v]) => v >= (THRESHOLDS[c] ?? 1));

export async function errorsPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal, search } = ctx;
  const minErrors = Math.max(1, Number(search.get("min") ?? 1) || 1);
  const range =
    t.mode === "range" ? { from: String(t.from), to: String(t.to) } : t.mode === "at" ? { from: String(t.at! - 4 * DEFAULT_WINDOW_S), to: String(t.at) } : { from: "-1h" };
  const form = minFilter({ id: "min-errors", label: "Show ports with at least", unit: "errors in the range", value: minErrors, min: 1 });
  const summary = h("p", { class: "sub" }, "\u00a0");
  const body = h("div", {}, loading("Summing error counters…"));
  root.append(
    h("div", { class: "page-head" }, h("h1", {}, "Errors"), summary),
    form,
    panel("Ports with rising error counters", body),
    panel(
      "Thresholds",
      h(
        "p",
        { class: "thresholds" },
        "A port is marked when a counter reaches its threshold within the range: ",
        ...Object.entries(THRESHOLDS).flatMap(([c, v], i) => [i ? ", " : "", h("code", {}, c), ` ≥ ${v}`]),
        ".",
      ),
    ),
  );

  const load = async () => {
    const r = await get<ErrorsResponse>("/fabric/errors", { ...range, min: minErrors, limit: 5000 }, signal);
    const bad = r.ports.filter((p) => over(p).length > 0).length;
    summary.textContent = `${fmt.plural(r.total, "port")} with errors from ${fmt.time(r.from)} to ${fmt.time(r.to)}; ${bad} over a threshold.`;
    body.replaceChildren(
      table({
        label: "Ports with errors",
        rows: r.ports,
        defaultSort: "total",
        pageSize: 50,
        empty: "No port's error counters rose in this range.",
        rowClass: (p) => (over(p).length ? "bad" : "warn"),
        columns: [
          { key: "node", label: "Port", value: (p) => `${p.node}:${p.port.port}`, cell: (p) => link(`/nodes/${p.port.guid}${timeQuery(t)}`, p.node, ` ${portOnly(p.port.port, p.port_name)}`) },
          { key: "peer", label: "Peer", value: (p) => p.peer_node ?? "", cell: (p) => (p.peer ? link(`/nodes/${p.peer.guid}${timeQuery(t)}`, p.peer_node ?? p.peer.guid, ` ${portOnly(p.peer.port, p.peer_name)}`) : "—") },
          { key: "total", label: "Errors", value: (p) => p.total, cell: (p) => fmt.count(p.total), numeric: true },
          {
            key: "counters",
            label: "Counters",
            value: (p) => Object.keys(p.counters).join(","),
            cell: (p) => {
              const hot = new Set(over(p).map(([c]) => c));
              return h("span", { class: "counters" }, ...Object.entries(p.counters).sort((a, b) => b[1] - a[1]).map(([c, v]) => h("span", { class: hot.has(c) ? "badge bad" : "badge" }, `${c} ${fmt.count(v)}`)));
            },
          },
          { key: "status", label: "Status", value: (p) => over(p).length, cell: (p) => (over(p).length ? h("span", { class: "badge bad" }, "over threshold") : h("span", { class: "badge warn" }, "below threshold")) },
          { key: "last", label: "Last rise", value: (p) => p.last, cell: (p) => fmt.time(p.last) },
          { key: "link", label: "Link", value: (p) => p.link ?? "", cell: (p) => (p.link ? link(`/links/${p.link}${timeQuery(t)}`, "open") : "—") },
        ],
      }),
    );
  };
  await load();
  if (t.mode === "live") refreshOnSweep(() => void load().catch(() => {}), signal, 10000);
}
