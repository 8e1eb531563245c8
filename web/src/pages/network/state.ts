// The map's live state, read by the renderer's reducers on every frame and
// written by the sweeps, the selection and the job highlight.
import { ERROR_COLOR, HIGHLIGHT_COLOR, JOB_COLOR, MAP_THEME } from "../../map/colors";
import type { DrawnLabel } from "../../map/labels";
import type { MapGraph } from "./graph";

/** A link direction the job's traffic crosses: link index j, direction 0
 * (A → B, the sending end is the layout's first end) or 1, and the link's
 * id and sending port as the API names them ("guid:port"). */
export interface JobDirection {
  j: number;
  dir: number;
  link: string;
  from: string;
  bytes: number;
}

export interface MapState {
  /** Quantized utilization per link direction (255: no data). */
  util: Uint8Array;
  /** One bit per node: errors in the last sweep. */
  errors: Uint8Array;
  /** Whether collapsed hosts are shown one by one. */
  expanded: boolean;
  /** The selected node, or -1. */
  selected: number;
  /** Hosts highlighted for a job (?job=ID), and the collapsed groups holding them. */
  highlighted: Set<number>;
  highlightedGroups: Set<number>;
  /** The job's link directions: bit 0 A → B, bit 1 B → A, per link index;
   * per collapsed group, bit 0 up (hosts → leaf), bit 1 down. */
  jobDirs: Map<number, number>;
  jobGroupDirs: Map<number, number>;
  jobDirList: JobDirection[];
  /** Per collapsed group (by leaf): the busiest host link up and down. */
  groupUp: Map<number, number>;
  groupDown: Map<number, number>;
  hoveredEdge: string | null;
  sweep: number;
  updates: number;
  lastUpdateMs: number;
  /** The labels of the last frame drawn. */
  labels: () => DrawnLabel[];
}

export function mapState(g: MapGraph): MapState {
  return {
    util: new Uint8Array(2 * g.m).fill(255),
    errors: new Uint8Array(Math.ceil(g.n / 8)),
    expanded: !g.collapsible,
    selected: -1,
    highlighted: new Set<number>(),
    highlightedGroups: new Set<number>(),
    jobDirs: new Map<number, number>(),
    jobGroupDirs: new Map<number, number>(),
    jobDirList: [],
    groupUp: new Map<number, number>(),
    groupDown: new Map<number, number>(),
    hoveredEdge: null,
    sweep: -1,
    updates: 0,
    lastUpdateMs: 0,
    labels: () => [],
  };
}

export const hasError = (st: MapState, i: number) => (st.errors[i >> 3]! & (1 << (i & 7))) !== 0;

/** Node i's colour: selected, in the job, a switch by level, errors. */
export function nodeColor(g: MapGraph, st: MapState, i: number): string {
  if (i === st.selected) return HIGHLIGHT_COLOR;
  if (st.highlighted.has(i)) return JOB_COLOR;
  const sw = MAP_THEME.switches;
  if (g.layout.type[i] === 1) return hasError(st, i) ? ERROR_COLOR : sw[Math.min(g.layout.level[i]! - 1, sw.length - 1)]!;
  return hasError(st, i) ? ERROR_COLOR : MAP_THEME.host;
}
