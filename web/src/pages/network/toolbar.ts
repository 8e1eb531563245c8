// The map's toolbar: the node search, the zoom buttons, the legend and the
// sweep's figures; and the line under the map that says what is hovered.
import { h } from "../../dom";
import { ERROR_COLOR, UNMEASURED, utilGradientCss } from "../../map/colors";

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
}

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
  const legend = h(
    "div",
    { class: "legend", "aria-label": "Legend" },
    h("span", {}, "Utilization"),
    h("span", { class: "ramp", style: { background: utilGradientCss() } }),
    h("span", { class: "ramp-labels" }, h("span", {}, "0%"), h("span", {}, "100%")),
    h("span", { class: "swatch", style: { background: UNMEASURED } }),
    h("span", {}, "no data"),
    h("span", { class: "swatch round", style: { background: ERROR_COLOR } }),
    h("span", {}, "switch with errors"),
  );
  const zoomIn = h("button", { type: "button", class: "btn icon", title: "Zoom in", "aria-label": "Zoom in" }, "+");
  const zoomOut = h("button", { type: "button", class: "btn icon", title: "Zoom out", "aria-label": "Zoom out" }, "−");
  const zoomReset = h("button", { type: "button", class: "btn", title: "Show the whole fabric" }, "Fit");
  const el = h("div", { class: "map-toolbar" }, h("div", { class: "search-wrap" }, searchBox, results), zoomIn, zoomOut, zoomReset, legend, stats);
  return { el, searchBox, results, zoomIn, zoomOut, zoomReset, stats, info };
}
