// The map's toolbar (the node search, the zoom buttons and the sweep's
// figures) and its side panel: the legend, with the utilization scale in
// numbers, and the details of what is hovered or selected. The panel sits
// beside the map, never over it, so it hides no node.
import { h } from "../../dom";
import { ERROR_COLOR, MAP_THEME, UTIL_COLOR, utilColor } from "../../map/colors";

export interface MapToolbar {
  el: HTMLElement;
  searchBox: HTMLInputElement;
  results: HTMLUListElement;
  zoomIn: HTMLButtonElement;
  zoomOut: HTMLButtonElement;
  zoomReset: HTMLButtonElement;
  stats: HTMLElement;
  /** What the pointer is on, or the selected node. */
  info: HTMLElement;
  /** The side panel: legend and details. */
  side: HTMLElement;
  /** Paints the legend's theme colours again (after a change of theme). */
  repaint(): void;
}

/** The utilization scale's steps, in percent. */
export const LEGEND_STEPS = [0, 25, 50, 75, 100];

export function mapToolbar(): MapToolbar {
  const info = h("div", { class: "map-info", "aria-live": "polite" }, "Hover a switch or link for details; click to open it.");
  const stats = h("span", { class: "map-stats" }, "");
  const searchBox = h("input", {
    type: "search",
    placeholder: "Find node: name, GUID or LID",
    "aria-label": "Find a node by name, GUID or LID",
    class: "map-search",
    autocomplete: "off",
  });
  const results = h("ul", { class: "search-results", role: "listbox", hidden: true });
  const themed: [HTMLElement, () => string][] = [];
  const item = (color: () => string, text: string, round = false) => {
    const sw = h("span", { class: `swatch${round ? " round" : ""}`, style: { background: color() } });
    themed.push([sw, color]);
    return h("li", { class: "legend-item" }, sw, text);
  };
  const legend = h(
    "section",
    { class: "map-legend", "aria-label": "Legend" },
    h("h2", {}, "Utilization of each link direction"),
    h("p", { class: "map-legend-note" }, "Each link is drawn in two halves, each coloured by what leaves its end."),
    h("span", { class: "ramp", style: { background: `linear-gradient(to right, ${LEGEND_STEPS.map((p) => utilColor(p)).join(", ")})` } }),
    h(
      "ol",
      { class: "util-scale" },
      ...LEGEND_STEPS.map((p) => h("li", { class: "util-step", "data-pct": String(p) }, h("span", { class: "swatch", style: { background: utilColor(p) } }), `${p}%`)),
    ),
    h(
      "ul",
      { class: "map-legend-marks" },
      item(() => UTIL_COLOR[255]!, "no data"),
      item(() => MAP_THEME.switches[0]!, "switch", true),
      item(() => MAP_THEME.host, "host", true),
      item(() => ERROR_COLOR, "switch with errors", true),
    ),
  );
  const side = h("aside", { class: "map-side", "aria-label": "Legend and details" }, legend, h("section", { class: "map-details", "aria-label": "Details" }, h("h2", {}, "Details"), info));
  const zoomIn = h("button", { type: "button", class: "btn icon", title: "Zoom in", "aria-label": "Zoom in" }, "+");
  const zoomOut = h("button", { type: "button", class: "btn icon", title: "Zoom out", "aria-label": "Zoom out" }, "−");
  const zoomReset = h("button", { type: "button", class: "btn", title: "Show the whole fabric" }, "Fit");
  const el = h("div", { class: "map-toolbar" }, h("div", { class: "search-wrap" }, searchBox, results), zoomIn, zoomOut, zoomReset, stats);
  const repaint = () => {
    for (const [sw, color] of themed) sw.style.background = color();
  };
  return { el, searchBox, results, zoomIn, zoomOut, zoomReset, stats, info, side, repaint };
}
