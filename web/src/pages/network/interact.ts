// The map under the pointer and the keyboard: hovering a node or link says
// what it is, clicking opens its page (or zooms into a leaf's hosts), the
// zoom buttons and keys move the camera, and zooming in shows collapsed
// hosts one by one.
import type Sigma from "sigma";
import { portLabel } from "../../ports";
import { navigate } from "../../router";
import * as fmt from "../../format";
import { timeQuery } from "../../time";
import type { TimeView } from "../../time";
import type { MapGraph } from "./graph";
import { hasError } from "./state";
import type { MapState } from "./state";
import type { MapToolbar } from "./toolbar";

/** Camera ratio below which collapsed hosts are shown one by one. */
export const EXPAND_RATIO = 0.18;

export function interact(g: MapGraph, st: MapState, renderer: Sigma, bar: MapToolbar, container: HTMLElement, t: TimeView): void {
  const { layout, graph } = g;
  const { info } = bar;
  const setExpanded = (e: boolean) => {
    if (e === st.expanded) return;
    st.expanded = e;
    renderer.refresh();
  };
  renderer.getCamera().on("updated", (state) => {
    if (g.collapsible) setExpanded(state.ratio < EXPAND_RATIO);
  });

  // Hover and click.
  const pctOf = (q: number) => (q === 255 ? "no data" : fmt.pct(q / 2.54));
  renderer.on("enterNode", ({ node }) => {
    const d = graph.getNodeAttributes(node);
    if (d.group !== undefined) {
      const leaf = d.group as number;
      info.textContent = `${d.label as string} · busiest host link: up ${pctOf(st.groupUp.get(leaf) ?? 255)}, down ${pctOf(st.groupDown.get(leaf) ?? 255)} · click to zoom in`;
      return;
    }
    const i = d.i as number;
    info.textContent = `${layout.name[i]} · ${layout.type[i] === 1 ? "switch, level " + layout.level[i] : "host"}${g.fabricOf(i)} · GUID ${layout.guid[i]} · LID ${layout.lid[i]}${hasError(st, i) ? " · errors in the last sweep" : ""}`;
  });
  renderer.on("enterEdge", ({ edge }) => {
    st.hoveredEdge = edge;
    const d = graph.getEdgeAttributes(edge);
    if (d.group !== undefined) return;
    const j = d.j as number;
    const a = layout.edges[2 * j]!;
    const b = layout.edges[2 * j + 1]!;
    const end = (k: number, node: number) => portLabel(layout.name[node]!, layout.ports[k]!, layout.port_names?.[k] || undefined);
    info.textContent = `${end(2 * j, a)} → ${end(2 * j + 1, b)} ${pctOf(st.util[2 * j]!)} · back ${pctOf(st.util[2 * j + 1]!)} · ${fmt.rate(layout.capacity[j]!)} capacity`;
  });
  renderer.on("leaveEdge", () => (st.hoveredEdge = null));
  renderer.on("clickNode", ({ node }) => {
    const d = graph.getNodeAttributes(node);
    if (d.group !== undefined) {
      const p = renderer.getNodeDisplayData(node);
      if (p) void renderer.getCamera().animate({ x: p.x, y: p.y, ratio: EXPAND_RATIO / 2 }, { duration: 300 });
      return;
    }
    navigate(`/nodes/${layout.guid[d.i as number]}${timeQuery(t)}`);
  });
  renderer.on("clickEdge", ({ edge }) => {
    const d = graph.getEdgeAttributes(edge);
    if (d.group !== undefined) return;
    navigate(`/links/${g.linkId(d.j as number)}${timeQuery(t)}`);
  });

  const camera = renderer.getCamera();
  bar.zoomIn.addEventListener("click", () => void camera.animatedZoom({ duration: 200 }));
  bar.zoomOut.addEventListener("click", () => void camera.animatedUnzoom({ duration: 200 }));
  bar.zoomReset.addEventListener("click", () => void camera.animatedReset({ duration: 200 }));
  container.addEventListener("keydown", (e) => {
    const step = 0.1 * camera.ratio;
    const s = camera.getState();
    const moves: Record<string, () => void> = {
      "+": () => void camera.animatedZoom({ duration: 150 }),
      "=": () => void camera.animatedZoom({ duration: 150 }),
      "-": () => void camera.animatedUnzoom({ duration: 150 }),
      "0": () => void camera.animatedReset({ duration: 150 }),
      ArrowLeft: () => camera.setState({ ...s, x: s.x - step }),
      ArrowRight: () => camera.setState({ ...s, x: s.x + step }),
      ArrowUp: () => camera.setState({ ...s, y: s.y + step }),
      ArrowDown: () => camera.setState({ ...s, y: s.y - step }),
    };
    const f = moves[e.key];
    if (f) {
      e.preventDefault();
      f();
    }
  });
}
