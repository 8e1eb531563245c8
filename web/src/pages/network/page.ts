// The network map: the whole fabric drawn with WebGL (sigma.js over a
// graphology graph) at the layout the server computed once per topology
// version. Links are drawn in two halves coloured by what leaves each end;
// switches turn red when their error counters rose. Hosts under a leaf are
// one mark until the user zooms in. Colours follow the live stream, or the
// utilization at the chosen past time.
//
// The page's parts are modules of this folder: the graph (graph.ts), the
// live state (state.ts), the renderer and its re-colouring (renderer.ts),
// the toolbar (toolbar.ts), hover, click and camera (interact.ts), the
// search (search.ts), a job's highlight (jobbar.ts) and what the tests read
// (debug.ts); the labels are map/labels.ts.
import type { Layout, SweepMessage } from "../../api";
import { get } from "../../api";
import { h, loading } from "../../dom";
import * as fmt from "../../format";
import { onSweep, onTopology } from "../../live";
import type { PageContext } from "../../router";
import { render } from "../../router";
import { readMapTheme } from "../../map/colors";
import { onThemeChange } from "../../theme";
import { atParams, readTime } from "../../time";
import { exposeMap } from "./debug";
import { mapGraph, normalizeLayout } from "./graph";
import { interact } from "./interact";
import { showJobOnMap } from "./jobbar";
import { mapRenderer, recolorer } from "./renderer";
import { mapSearch } from "./search";
import { mapState } from "./state";
import { mapTableView } from "./tableview";
import { mapToolbar } from "./toolbar";

export async function networkPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal, search } = ctx;
  root.classList.add("map-page");

  readMapTheme();
  const bar = mapToolbar();
  const container = h("div", { class: "map", id: "map", tabindex: "0", "aria-label": "Network map" });
  const overlay = h("div", { class: "map-overlay" }, loading("Loading the fabric layout…"));
  const jobId = search.get("job");
  const jobBar = h("div", { class: "job-bar", role: "status", hidden: !jobId });
  root.append(bar.el, jobBar, h("div", { class: "map-wrap" }, h("div", { class: "map-stage" }, container, overlay), bar.side));

  // Start the stream before the layout arrives: its first message comes at once.
  let pending: SweepMessage | null = null;
  let apply: ((m: SweepMessage) => void) | null = null;
  const receive = (m: SweepMessage) => (apply ? apply(m) : (pending = m));
  if (t.mode === "live") {
    onSweep(receive, signal);
    onTopology(() => void render(), signal);
  } else {
    get<SweepMessage>("/fabric/utilization", atParams(t), signal).then(receive, () => {});
  }

  const layout = normalizeLayout(await get<Layout>("/fabric/layout", atParams(t), signal));
  if (signal.aborted) return;
  const g = mapGraph(layout);
  const st = mapState(g);
  const renderer = mapRenderer(g, st, container);
  signal.addEventListener("abort", () => renderer.kill());
  const recolor = recolorer(g, st, renderer, bar.stats, container, t);
  interact(g, st, renderer, bar, container, t);
  const select = mapSearch(g, st, renderer, bar, t);
  exposeMap(g, st, renderer, jobId);
  // The theme changed: its colours for the nodes, labels and legend.
  onThemeChange(() => {
    readMapTheme();
    bar.repaint();
    renderer.refresh();
  }, signal);
  // The map's text alternative: the table view under it.
  const tv = mapTableView(g, st);
  root.append(tv.el);
  container.setAttribute("role", "img");
  container.setAttribute("aria-label", `Network map of ${tv.summary}; the table view under the map lists them`);
  for (const c of container.querySelectorAll("canvas")) c.setAttribute("aria-hidden", "true"); // sigma's layers: the label speaks for them

  // First frame: the whole map with whatever colours have arrived.
  apply = recolor;
  if (pending) recolor(pending);
  else renderer.refresh();
  bar.stats.textContent ||= `${fmt.plural(g.n, "node")} · ${fmt.plural(g.m, "link")}`;
  overlay.remove();
  const initial = search.get("node");
  if (initial) {
    const i = layout.guid.indexOf(initial);
    if (i >= 0) select(i, false);
  }
  if (jobId) showJobOnMap(jobId, g, st, renderer, jobBar, container, t, signal);
  requestAnimationFrame(() => {
    if (signal.aborted) return;
    performance.mark("netloom:map:first-frame");
    container.dataset.ready = "true";
  });
}
