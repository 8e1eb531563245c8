// The events page: what changed in the fabric, newest first, filterable by
// kind.
import type { FabricEvent } from "../api";
import { get } from "../api";
import { h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import { refreshOnSweep } from "../live";
import type { PageContext } from "../router";
import { navigate } from "../router";
import { counted } from "../listed";
import { table } from "../table";
import { readTime, timeQuery } from "../time";

const KINDS = ["fabric_discovered", "node_added", "node_removed", "link_up", "link_down", "lid_changed", "routes_changed", "counter_reset", "port_unreachable", "port_recovered"];

/** The most events the page asks for (the API's limit parameter). */
const LIMIT = 5000;

export async function eventsPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal, search } = ctx;
  const kind = search.get("kind") ?? "";
  // ?limit= asks for fewer (the newest); the page says when the list is cut.
  const asked = Number.parseInt(search.get("limit") ?? "", 10);
  const limit = asked >= 1 && asked <= LIMIT ? asked : LIMIT;
  const range = t.mode === "range" ? { from: String(t.from), to: String(t.to) } : t.mode === "at" ? { from: String(t.at! - 86400), to: String(t.at) } : { from: "-24h" };
  const select = h(
    "select",
    {
      id: "event-kind",
      onchange: (e: Event) => {
        const q = new URLSearchParams(location.search);
        const v = (e.target as HTMLSelectElement).value;
        if (v) q.set("kind", v);
        else q.delete("kind");
        q.delete("page");
        navigate(location.pathname + (q.toString() ? "?" + q.toString() : ""));
      },
    },
    h("option", { value: "" }, "All kinds"),
    ...KINDS.map((k) => h("option", { value: k, selected: k === kind }, k.replace(/_/g, " "))),
  );
  const summary = h("p", { class: "sub" }, "\u00a0");
  const body = h("div", {}, loading("Loading events…"));
  root.append(h("div", { class: "page-head" }, h("h1", {}, "Events"), summary), h("div", { class: "filters" }, h("label", { for: "event-kind" }, "Kind"), select), panel("Fabric events", body));

  const load = async () => {
    const r = await get<{ from: string; to: string; events: FabricEvent[]; total: number; limit: number; truncated: boolean }>("/events", { ...range, kind, limit: String(limit) }, signal);
    // A cut list says so, with the total the daemon counted.
    summary.textContent = `${r.truncated ? `Showing the newest ${fmt.count(r.events.length)} of ${counted(r.total, "event")}` : counted(r.total, "event")} from ${fmt.time(r.from)} to ${fmt.time(r.to)}.`;
    summary.dataset.total = String(r.total);
    summary.dataset.shown = String(r.events.length);
    body.replaceChildren(
      table({
        label: "Events",
        rows: r.events,
        defaultSort: "time",
        pageSize: 50,
        empty: "No events in this range.",
        columns: [
          { key: "time", label: "Time", value: (e) => e.time, cell: (e) => h("time", { datetime: e.time }, fmt.time(e.time)) },
          { key: "kind", label: "Kind", value: (e) => e.kind, cell: (e) => h("span", { class: `badge kind-${e.kind}` }, e.kind.replace(/_/g, " ")) },
          { key: "node", label: "Node", value: (e) => e.guid ?? "", cell: (e) => (e.guid ? link(`/nodes/${e.guid}${timeQuery(t)}`, h("code", {}, e.guid)) : "—") },
          { key: "port", label: "Port", value: (e) => e.port ?? 0, cell: (e) => (e.port ? String(e.port) : "—"), numeric: true },
          { key: "detail", label: "Detail", value: (e) => e.detail },
        ],
      }),
    );
  };
  await load();
  if (t.mode === "live") refreshOnSweep(() => void load().catch(() => {}), signal, 10000);
}
