// Finding a node on the map by name, GUID or LID: the results under the
// search box, and the selected node (kept in the address, ?node=GUID)
// brought into view.
import type Sigma from "sigma";
import { h, link } from "../../dom";
import { setQuery } from "../../router";
import { timeQuery } from "../../time";
import type { TimeView } from "../../time";
import type { MapGraph } from "./graph";
import { EXPAND_RATIO } from "./interact";
import type { MapState } from "./state";
import type { MapToolbar } from "./toolbar";

/** Wires the search box; returns select(i, moveCamera), which selects node
 * i (-1: none). */
export function mapSearch(g: MapGraph, st: MapState, renderer: Sigma, bar: MapToolbar, t: TimeView): (i: number, moveCamera?: boolean) => void {
  const { layout, n } = g;
  const { searchBox, results, info } = bar;
  const camera = renderer.getCamera();
  const find = (q: string): number[] => {
    const s = q.trim().toLowerCase();
    if (!s) return [];
    const out: number[] = [];
    const lid = /^\d+$/.test(s) ? Number(s) : -1;
    for (let i = 0; i < n && out.length < 8; i++) {
      if (lid >= 0 && layout.lid[i] === lid) out.unshift(i);
      else if (layout.name[i]!.toLowerCase().includes(s) || (s.startsWith("0x") && layout.guid[i]!.includes(s))) out.push(i);
    }
    return out;
  };
  const select = (i: number, moveCamera = true) => {
    st.selected = i;
    results.hidden = true;
    const q = new URLSearchParams(location.search);
    if (i >= 0) q.set("node", layout.guid[i]!);
    else q.delete("node");
    setQuery(q);
    renderer.refresh();
    if (i >= 0 && moveCamera) {
      const p = renderer.getNodeDisplayData(String(i));
      if (p) void camera.animate({ x: p.x, y: p.y, ratio: layout.level[i] === 0 ? EXPAND_RATIO / 3 : Math.min(camera.ratio, 0.3) }, { duration: 400 });
      info.replaceChildren(
        `${layout.name[i]}${g.fabricOf(i)} · GUID ${layout.guid[i]} · LID ${layout.lid[i]} · `,
        link(`/nodes/${layout.guid[i]}${timeQuery(t)}`, "open node page"),
      );
    }
  };
  const showResults = () => {
    const hits = find(searchBox.value);
    results.replaceChildren(
      ...hits.map((i) =>
        h(
          "li",
          {},
          h(
            "button",
            { type: "button", role: "option", onclick: () => select(i) },
            h("strong", {}, layout.name[i]!),
            ` ${layout.type[i] === 1 ? "switch" : "host"}${g.fabricOf(i)} · LID ${layout.lid[i]} · ${layout.guid[i]}`,
          ),
        ),
      ),
    );
    if (!hits.length && searchBox.value.trim()) results.replaceChildren(h("li", { class: "none" }, "No node matches."));
    results.hidden = !searchBox.value.trim();
  };
  searchBox.addEventListener("input", showResults);
  searchBox.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      const hits = find(searchBox.value);
      if (hits.length) select(hits[0]!);
    } else if (e.key === "Escape") {
      results.hidden = true;
    } else if (e.key === "ArrowDown") {
      (results.querySelector("button") as HTMLButtonElement | null)?.focus();
      e.preventDefault();
    }
  });
  return select;
}
