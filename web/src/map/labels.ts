// The map's node labels, tiered so a large fabric stays readable and fast:
// sigma proposes at most a few labels per screen cell (its label grid, the
// biggest node of each cell first), and this module draws, after each
// frame, those that do not overlap a label already drawn, in order of
// importance: labels asked for (selected node, a job's hosts), then
// switches from the top level down, then hosts. Each label has a halo of
// the map's background so it reads over links; one that the map's right
// edge would cut goes left of its node.
import type Sigma from "sigma";
import type { NodeHoverDrawingFunction, NodeLabelDrawingFunction } from "sigma/rendering";
import { MAP_THEME } from "./colors";

/** A label as drawn, in the map's viewport pixels. */
export interface DrawnLabel {
  key: string;
  text: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

interface Candidate {
  key: string;
  text: string;
  x: number;
  y: number;
  size: number;
  rank: number;
}

const FONT_SIZE = 11;
const FONT = `${FONT_SIZE}px system-ui, -apple-system, sans-serif`;
/** No more labels than this in one frame (a zoomed-in Stampede view). */
const MAX_LABELS = 400;
const MAX_CHARS = 28;

const clip = (label: string) => (label.length > MAX_CHARS ? label.slice(0, MAX_CHARS - 1) + "…" : label);

/** The hovered node (sigma's defaultDrawNodeHover): a ring around it and
 * its label on a box of the map's own background, edged in the hosts'
 * colour, so it reads in either theme (sigma's own box is white in both);
 * left of the node where the map's right edge would cut it. */
export const drawHover: NodeHoverDrawingFunction = (ctx, data) => {
  const text = data.label ? clip(data.label) : "";
  const pad = 3;
  const r = data.size + pad;
  ctx.font = FONT;
  const w = text ? ctx.measureText(text).width + 2 * pad : 0;
  const half = Math.max(r, FONT_SIZE / 2 + pad);
  const left = text && data.x + r + w > ctx.canvas.clientWidth;
  ctx.beginPath();
  if (text) ctx.roundRect(left ? data.x - r - w : data.x - r, data.y - half, 2 * r + w, 2 * half, half);
  else ctx.arc(data.x, data.y, r, 0, 2 * Math.PI);
  ctx.fillStyle = MAP_THEME.bg;
  ctx.shadowBlur = 6;
  ctx.shadowColor = "rgba(0, 0, 0, 0.35)";
  ctx.fill();
  ctx.shadowBlur = 0;
  ctx.shadowColor = "transparent";
  ctx.lineWidth = 1;
  ctx.strokeStyle = MAP_THEME.host;
  ctx.stroke();
  if (!text) return;
  ctx.fillStyle = MAP_THEME.label;
  ctx.textBaseline = "alphabetic";
  ctx.fillText(text, left ? data.x - r - w + pad : data.x + r + pad, data.y + FONT_SIZE / 3);
};

/** The labels' two halves: drawLabel, sigma's defaultDrawNodeLabel
 * setting (given when the renderer is made: setting it later would drop
 * sigma's indices until the next frame), which collects sigma's proposals,
 * and attach(renderer), which draws them after each frame and returns the
 * labels of the last frame. rank(key, forced) orders them (lower first). */
export function tieredLabels(rank: (key: string, forced: boolean) => number): {
  drawLabel: NodeLabelDrawingFunction;
  attach: (renderer: Sigma) => () => DrawnLabel[];
} {
  let candidates: Candidate[] = [];
  let drawn: DrawnLabel[] = [];
  const drawLabel: NodeLabelDrawingFunction = (_ctx, data) => {
    if (!data.label) return;
    const text = clip(data.label);
    candidates.push({ key: data.key, text, x: data.x, y: data.y, size: data.size, rank: rank(data.key, data.forceLabel === true) });
  };
  const attach = (renderer: Sigma) => {
    renderer.on("beforeRender", () => (candidates = []));
    renderer.on("afterRender", () => {
      const ctx = renderer.getCanvases().labels?.getContext("2d");
      if (!ctx) return;
      candidates.sort((a, b) => a.rank - b.rank || b.size - a.size);
      ctx.font = FONT;
      ctx.textBaseline = "alphabetic";
      ctx.lineJoin = "round";
      ctx.lineWidth = 3;
      ctx.strokeStyle = MAP_THEME.bg;
      ctx.fillStyle = MAP_THEME.label;
      drawn = [];
      const width = renderer.getDimensions().width;
      for (const c of candidates) {
        if (drawn.length >= MAX_LABELS) break;
        const w = ctx.measureText(c.text).width;
        // Right of the node, or left of it where the map's edge would cut it.
        const right = c.x + c.size + 3;
        const box = { key: c.key, text: c.text, x: right + w > width ? c.x - c.size - 3 - w : right, y: c.y - FONT_SIZE * 0.75, w, h: FONT_SIZE + 2 };
        if (drawn.some((d) => box.x < d.x + d.w + 2 && d.x < box.x + box.w + 2 && box.y < d.y + d.h && d.y < box.y + box.h)) continue;
        const baseline = c.y + FONT_SIZE / 3;
        ctx.strokeText(c.text, box.x, baseline);
        ctx.fillText(c.text, box.x, baseline);
        drawn.push(box);
      }
    });
    return () => drawn;
  };
  return { drawLabel, attach };
}
