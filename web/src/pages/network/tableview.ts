// The map as text: a "Table view" under the map that lists every node and
// every link of the layout the map draws, with each link direction's
// utilization as the map colours it (the sweep it is from stated). It is
// the map's text alternative for a screen reader or a keyboard, and a way
// to sort the fabric by load. Drawn when opened, and again with "Refresh".
import { h, link } from "../../dom";
import * as fmt from "../../format";
import { table } from "../../table";
import type { MapGraph } from "./graph";
import type { MapState } from "./state";
import { hasError } from "./state";

/** Utilization of a direction as the map stores it (0..254 for 0..100%,
 * 255 no data), in percent; -1 for no data. */
const pctOf = (q: number): number => (q === 255 ? -1 : q / 2.54);
const pctText = (p: number): string => (p < 0 ? "no data" : fmt.pct(p));

interface NodeRow {
  i: number;
  name: string;
  kind: string;
  guid: string;
  lid: number;
  links: number;
  errors: boolean;
}

interface LinkRow {
  j: number;
  a: string;
  b: string;
  ab: number;
  ba: number;
  capacity: number;
}

export interface MapTableView {
  el: HTMLElement;
  /** The sentence the map's canvas is described by. */
  summary: string;
}

export function mapTableView(g: MapGraph, st: MapState): MapTableView {
  const { layout } = g;
  let switches = 0;
  for (let i = 0; i < g.n; i++) if (layout.type[i] === 1) switches++;
  const summary = `${fmt.count(switches)} switches, ${fmt.count(g.n - switches)} hosts and ${fmt.count(g.m)} links`;
  const body = h("div", { class: "map-table-body", id: "map-table" });
  const refresh = h("button", { type: "button", class: "btn small" }, "Refresh");
  const el = h(
    "details",
    { class: "map-table" },
    h("summary", {}, `Table view: ${summary}`),
    body,
  );

  const draw = () => {
    const degree = new Array<number>(g.n).fill(0);
    for (let j = 0; j < g.m; j++) {
      degree[layout.edges[2 * j]!]!++;
      degree[layout.edges[2 * j + 1]!]!++;
    }
    const nodes: NodeRow[] = Array.from({ length: g.n }, (_, i) => ({
      i,
      name: layout.name[i]! + g.fabricOf(i),
      kind: layout.type[i] === 1 ? `switch, level ${layout.level[i]}` : "host",
      guid: layout.guid[i]!,
      lid: layout.lid[i]!,
      links: degree[i]!,
      errors: hasError(st, i),
    }));
    const links: LinkRow[] = Array.from({ length: g.m }, (_, j) => ({
      j,
      a: `${layout.name[layout.edges[2 * j]!]}:${layout.ports[2 * j]}`,
      b: `${layout.name[layout.edges[2 * j + 1]!]}:${layout.ports[2 * j + 1]}`,
      ab: pctOf(st.util[2 * j]!),
      ba: pctOf(st.util[2 * j + 1]!),
      capacity: layout.capacity[j]!,
    }));
    body.replaceChildren(
      h(
        "p",
        { class: "map-table-note" },
        st.sweep >= 0 ? `Utilization of sweep ${st.sweep}, as the map colours it. ` : "No sweep's utilization yet. ",
        refresh,
      ),
      table<NodeRow>({
        label: "Nodes of the map",
        rows: nodes,
        param: "mt_n_",
        pageSize: 25,
        defaultSort: "name",
        defaultDir: "asc",
        empty: "No nodes.",
        rowClass: (r) => (r.errors ? "bad" : ""),
        columns: [
          { key: "name", label: "Node", value: (r) => r.name, cell: (r) => link(`/nodes/${encodeURIComponent(r.guid)}`, r.name) },
          { key: "kind", label: "Kind", value: (r) => r.kind },
          { key: "guid", label: "GUID", value: (r) => r.guid },
          { key: "lid", label: "LID", value: (r) => r.lid, numeric: true },
          { key: "links", label: "Links", value: (r) => r.links, numeric: true },
          { key: "errors", label: "Errors in the last sweep", value: (r) => (r.errors ? "yes" : "no") },
        ],
      }),
      table<LinkRow>({
        label: "Links of the map",
        rows: links,
        param: "mt_l_",
        pageSize: 25,
        defaultSort: "ab",
        defaultDir: "desc",
        empty: "No links.",
        columns: [
          { key: "a", label: "Link", value: (r) => `${r.a} ↔ ${r.b}`, cell: (r) => link(`/links/${encodeURIComponent(g.linkId(r.j))}`, `${r.a} ↔ ${r.b}`) },
          { key: "ab", label: "Utilization →", title: "From the first end to the second", value: (r) => r.ab, cell: (r) => pctText(r.ab), numeric: true },
          { key: "ba", label: "Utilization ←", title: "From the second end to the first", value: (r) => r.ba, cell: (r) => pctText(r.ba), numeric: true },
          { key: "capacity", label: "Capacity", value: (r) => r.capacity, cell: (r) => fmt.rate(r.capacity), numeric: true },
        ],
      }),
    );
  };
  refresh.addEventListener("click", () => {
    draw();
    refresh.focus();
  });
  el.addEventListener("toggle", () => {
    if (el.open) draw();
  });
  return { el, summary };
}
