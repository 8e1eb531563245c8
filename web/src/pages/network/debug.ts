// What the browser tests read of the map (window.__netloomMap): the
// layout's size, the sweep shown, how long re-colouring took, the colours
// drawn and the job's highlight.
import type Sigma from "sigma";
import type { DrawnLabel } from "../../map/labels";
import type { MapGraph } from "./graph";
import { nodeColor } from "./state";
import type { JobDirection, MapState } from "./state";

interface MapDebug {
  version: number;
  nodes: number;
  links: number;
  sweep: number;
  updates: number;
  lastUpdateMs: number;
  expanded: boolean;
  util: Uint8Array;
  edgeColors(j: number): [string, string];
  /** The id of link j, as its page's address and the API use it. */
  linkId(j: number): string;
  /** Layout indices of the hosts highlighted for ?job=. */
  highlighted: number[];
  /** The link directions the job's traffic crosses, highlighted for ?job=. */
  jobDirections: JobDirection[];
  job: string | null;
  nodeColor(i: number): string;
  /** The labels drawn in the last frame, in the map's viewport pixels. */
  labels(): DrawnLabel[];
  /** Where node i is drawn, in the map's viewport pixels (null: not drawn). */
  screen(i: number): { x: number; y: number } | null;
}

declare global {
  interface Window {
    __netloomMap?: MapDebug;
  }
}

export function exposeMap(g: MapGraph, st: MapState, renderer: Sigma, jobId: string | null): void {
  window.__netloomMap = {
    version: g.layout.version,
    nodes: g.n,
    links: g.m,
    get sweep() {
      return st.sweep;
    },
    get updates() {
      return st.updates;
    },
    get lastUpdateMs() {
      return st.lastUpdateMs;
    },
    get expanded() {
      return st.expanded;
    },
    get util() {
      return st.util;
    },
    linkId: g.linkId,
    edgeColors: (j: number) => {
      const d = renderer.getEdgeDisplayData("e" + j) as { color: string; color2?: string } | undefined;
      return [d?.color ?? "", d?.color2 ?? ""];
    },
    nodeColor: (i: number) => nodeColor(g, st, i),
    labels: () => st.labels(),
    screen: (i: number) => {
      const d = renderer.getNodeDisplayData(String(i));
      if (!d || d.hidden) return null;
      const p = renderer.framedGraphToViewport(d);
      return { x: p.x, y: p.y };
    },
    get highlighted() {
      return [...st.highlighted].sort((a, b) => a - b);
    },
    get jobDirections() {
      return st.jobDirList;
    },
    job: jobId,
  };
}
