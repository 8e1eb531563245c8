// The map drawn with WebGL: sigma.js over the graph, links in two halves
// coloured by what leaves each end (map/halfedge), through reducers that
// read the live state; and the re-colouring from each sweep's message.
import Sigma from "sigma";
import type { SweepMessage } from "../../api";
import * as fmt from "../../format";
import { decode } from "../../live";
import { JOB_COLOR, MAP_THEME, UTIL_COLOR } from "../../map/colors";
import { HalfEdgeProgram } from "../../map/halfedge";
import { drawHover, tieredLabels } from "../../map/labels";
import type { TimeView } from "../../time";
import type { MapGraph } from "./graph";
import { hasError, nodeColor } from "./state";
import type { MapState } from "./state";

/** Up to this many nodes every label is a candidate at any zoom. */
const FEW_NODES = 96;

/** The map's renderer; its labels are tiered (map/labels.ts): with few
 * nodes all are candidates, else switches (drawn bigger) from the whole
 * view and hosts once zoomed in far enough to draw them 3 px wide. */
export function mapRenderer(g: MapGraph, st: MapState, container: HTMLElement): Sigma {
  const { layout } = g;
  const few = g.n <= FEW_NODES;
  let topLevel = 0;
  for (let i = 0; i < g.n; i++) topLevel = Math.max(topLevel, layout.level[i]!);
  // Labels asked for first (the selection, a job's hosts), then switches
  // from the top level down, then leaf groups, then hosts.
  const labels = tieredLabels((key, forced) => {
    if (forced) return 0;
    if (key.charCodeAt(0) === 103 /* g */) return topLevel + 2;
    const i = Number(key);
    return layout.type[i] === 1 ? 1 + topLevel - layout.level[i]! : topLevel + 3;
  });
  const renderer = new Sigma(g.graph, container, {
    defaultDrawNodeLabel: labels.drawLabel,
    defaultDrawNodeHover: drawHover,
    defaultEdgeType: "halves",
    edgeProgramClasses: { halves: HalfEdgeProgram },
    enableEdgeEvents: true,
    renderEdgeLabels: false,
    labelRenderedSizeThreshold: few ? 0 : 3,
    labelDensity: few ? 4 : 0.5,
    labelFont: "system-ui, sans-serif",
    labelSize: 11,
    minCameraRatio: 0.003,
    maxCameraRatio: 3,
    stagePadding: 24,
    zIndex: true,
    nodeReducer: (key, data) => {
      const out = { ...data };
      if (key.charCodeAt(0) === 103 /* g */) {
        out.hidden = st.expanded;
        out.color = st.highlightedGroups.has(data.group as number) ? JOB_COLOR : MAP_THEME.host;
        if (st.highlightedGroups.has(data.group as number)) out.zIndex = 2;
        return out;
      }
      const i = data.i as number;
      out.color = nodeColor(g, st, i);
      if (layout.level[i] === 0 && !st.expanded && i !== st.selected) out.hidden = true;
      if (hasError(st, i)) {
        out.size = (data.size as number) + 1.5;
        out.zIndex = 1;
      }
      if (st.highlighted.has(i)) {
        out.size = (data.size as number) + 3;
        out.zIndex = 2;
        out.hidden = false;
        out.forceLabel = st.highlighted.size <= 24;
      }
      if (i === st.selected) {
        out.size = (data.size as number) + 4;
        out.forceLabel = true;
        out.zIndex = 2;
        out.hidden = false;
      }
      return out;
    },
    edgeReducer: (key, data) => {
      const out = { ...data } as Record<string, unknown>;
      if (data.group !== undefined) {
        const leaf = data.group as number;
        const bits = st.jobGroupDirs.get(leaf) ?? 0;
        out.hidden = st.expanded;
        out.color = bits & 1 ? JOB_COLOR : UTIL_COLOR[st.groupUp.get(leaf) ?? 255];
        out.color2 = bits & 2 ? JOB_COLOR : UTIL_COLOR[st.groupDown.get(leaf) ?? 255];
        if (bits) out.zIndex = 1;
      } else {
        const j = data.j as number;
        // A direction the job's traffic crosses is drawn in the job's
        // colour at its sending half.
        const bits = st.jobDirs.get(j) ?? 0;
        out.color = bits & 1 ? JOB_COLOR : UTIL_COLOR[st.util[2 * j]!];
        out.color2 = bits & 2 ? JOB_COLOR : UTIL_COLOR[st.util[2 * j + 1]!];
        if (bits) out.zIndex = 1;
      }
      if (key === st.hoveredEdge) out.zIndex = 1;
      return out as typeof data;
    },
  });
  st.labels = labels.attach(renderer);
  return renderer;
}

/** Re-colours the map from a sweep message and says the sweep in stats;
 * measured with performance marks. */
export function recolorer(g: MapGraph, st: MapState, renderer: Sigma, stats: HTMLElement, container: HTMLElement, t: TimeView): (msg: SweepMessage) => void {
  const { graph, n, m } = g;
  return (msg: SweepMessage): void => {
    if (msg.version !== g.layout.version || msg.links !== m) return; // topology event will reload
    performance.mark("netloom:map:update-start");
    st.util = decode(msg.util);
    st.errors = decode(msg.errors);
    if (g.collapsible) {
      for (const [leaf, list] of g.groupLinks) {
        let up = -1;
        let down = -1;
        for (const [j, hostIsA] of list) {
          const u = st.util[2 * j + (hostIsA ? 0 : 1)]!;
          const d = st.util[2 * j + (hostIsA ? 1 : 0)]!;
          if (u !== 255) up = Math.max(up, u);
          if (d !== 255) down = Math.max(down, d);
        }
        st.groupUp.set(leaf, up < 0 ? 255 : up);
        st.groupDown.set(leaf, down < 0 ? 255 : down);
      }
    }
    st.sweep = msg.sweep;
    st.updates++;
    renderer.refresh({ skipIndexation: true, partialGraph: { nodes: graph.nodes(), edges: graph.edges() } });
    performance.mark("netloom:map:update-end");
    st.lastUpdateMs = performance.measure("netloom:map:update", "netloom:map:update-start", "netloom:map:update-end").duration;
    const hot = countHot(st.util);
    stats.textContent =
      `${fmt.plural(n, "node")} · ${fmt.plural(m, "link")} · ` +
      (t.mode === "live" ? `sweep ${msg.sweep} · ` : `${fmt.time(msg.time)} · `) +
      `${hot} link directions ≥ 80% · ${fmt.plural(msg.error_nodes, "node")} with errors`;
    container.dataset.sweep = String(msg.sweep);
  };
}

function countHot(util: Uint8Array): number {
  let k = 0;
  for (let i = 0; i < util.length; i++) if (util[i]! >= 203 && util[i] !== 255) k++;
  return k;
}
