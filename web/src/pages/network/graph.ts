// The fabric's layout as the map draws it: a graphology graph of its nodes
// and links at the positions the server computed, with each leaf's hosts
// gathered into one mark (joined to the leaf by one line) when the fabric
// has many hosts.
import Graph from "graphology";
import type { Layout } from "../../api";
import { decode } from "../../live";

/** Leaf groups collapse when the fabric has more hosts than this. */
const COLLAPSE_ABOVE_HOSTS = 512;

export interface MapGraph {
  layout: Layout;
  /** Nodes and links of the layout. */
  n: number;
  m: number;
  graph: Graph;
  /** Whether each leaf's hosts are one mark until the user zooms in. */
  collapsible: boolean;
  /** Links from a host to its leaf, per group: [link index, host end is A]. */
  groupLinks: Map<number, [number, boolean][]>;
  /** The id of link j, as its page's address and the API use it. */
  linkId(j: number): string;
  /** " · fabric NAME" for node i in a view of several fabrics, else "". */
  fabricOf(i: number): string;
}

export function mapGraph(layout: Layout): MapGraph {
  const fabricOf = (i: number): string => (layout.fabrics && layout.fabric ? ` · fabric ${layout.fabrics[layout.fabric[i] ?? 0] ?? "?"}` : "");
  const n = layout.x.length;
  const m = layout.edges.length / 2;

  // Hosts and their leaf groups.
  let hostCount = 0;
  const groupMembers = new Map<number, number[]>();
  for (let i = 0; i < n; i++) {
    if (layout.level[i] !== 0) continue;
    hostCount++;
    const g = layout.group[i]!;
    if (g >= 0) {
      let list = groupMembers.get(g);
      if (!list) groupMembers.set(g, (list = []));
      list.push(i);
    }
  }
  const collapsible = hostCount > COLLAPSE_ABOVE_HOSTS;
  const groupLinks = new Map<number, [number, boolean][]>();

  const graph = new Graph({ multi: true, type: "undirected", allowSelfLoops: false });
  for (let i = 0; i < n; i++) {
    const sw = layout.type[i] === 1;
    graph.addNode(String(i), {
      x: layout.x[i],
      y: layout.y[i],
      size: sw ? 3.5 : 2,
      label: layout.name[i],
      i,
    });
  }
  for (let j = 0; j < m; j++) {
    const a = layout.edges[2 * j]!;
    const b = layout.edges[2 * j + 1]!;
    graph.addEdgeWithKey("e" + j, String(a), String(b), { j });
    if (collapsible) {
      const host = layout.level[a] === 0 ? a : layout.level[b] === 0 ? b : -1;
      const g = host >= 0 ? layout.group[host]! : -1;
      if (g >= 0) {
        let list = groupLinks.get(g);
        if (!list) groupLinks.set(g, (list = []));
        list.push([j, host === a]);
      }
    }
  }
  // One mark per leaf group, joined to its leaf by one two-coloured line.
  if (collapsible) {
    for (const [leaf, hosts] of groupMembers) {
      let sx = 0;
      let miny = Infinity;
      let maxy = -Infinity;
      for (const hh of hosts) {
        sx += layout.x[hh]!;
        miny = Math.min(miny, layout.y[hh]!);
        maxy = Math.max(maxy, layout.y[hh]!);
      }
      graph.addNode("g" + leaf, {
        x: sx / hosts.length,
        y: (miny + maxy) / 2,
        size: 2.5 + Math.sqrt(hosts.length) / 2,
        label: `${layout.name[leaf]}: ${hosts.length} hosts`,
        group: leaf,
      });
      graph.addEdgeWithKey("g" + leaf, "g" + leaf, String(leaf), { group: leaf });
    }
  }

  const linkId = (j: number) => {
    const a = layout.edges[2 * j]!;
    const b = layout.edges[2 * j + 1]!;
    return `${layout.guid[a]}:${layout.ports[2 * j]}-${layout.guid[b]}:${layout.ports[2 * j + 1]}`;
  };
  return { layout, n, m, graph, collapsible, groupLinks, linkId, fabricOf };
}

/** The server sends the byte arrays (type, level, ports) base64-encoded,
 * as Go encodes []uint8; make them plain number arrays. */
export function normalizeLayout(l: Layout): Layout {
  const bytes = (v: number[] | string): number[] => (typeof v === "string" ? Array.from(decode(v)) : v);
  l.type = bytes(l.type as number[] | string);
  l.level = bytes(l.level as number[] | string);
  l.ports = bytes(l.ports as number[] | string);
  return l;
}
