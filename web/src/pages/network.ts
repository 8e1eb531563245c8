// The network map: the whole fabric drawn with WebGL (sigma.js over a
// graphology graph) at the layout the server computed once per topology
// version. Links are drawn in two halves coloured by what leaves each end;
// switches turn red when their error counters rose. Hosts under a leaf are
// one mark until the user zooms in. Colours follow the live stream, or the
// utilization at the chosen past time.
import Graph from "graphology";
import Sigma from "sigma";
import type { Layout, SweepMessage } from "../api";
import { get } from "../api";
import { append, h, link, loading } from "../dom";
import * as fmt from "../format";
import { decode, onSweep, onTopology, refreshOnSweep } from "../live";
import type { JobOnLink, NodeView } from "../jobs/api";
import { jobPath } from "../jobs/api";
import { ERROR_COLOR, HIGHLIGHT_COLOR, HOST_COLOR, JOB_COLOR, SWITCH_COLOR, UNMEASURED, UTIL_COLOR, utilGradientCss } from "../map/colors";
import { HalfEdgeProgram } from "../map/halfedge";
import type { PageContext } from "../router";
import { navigate, render, setQuery } from "../router";
import { atParams, readTime, timeQuery } from "../time";

/** Leaf groups collapse when the fabric has more hosts than this. */
const COLLAPSE_ABOVE_HOSTS = 512;
/** Camera ratio below which collapsed hosts are shown one by one. */
const EXPAND_RATIO = 0.18;

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
  /** The link directions the job's traffic crosses, highlighted for ?job=:
   * link index j, direction 0 (A → B, the sending end is the layout's
   * first end) or 1, and the link's id and sending port as the API names
   * them ("guid:port"). */
  jobDirections: { j: number; dir: number; link: string; from: string; bytes: number }[];
  job: string | null;
  nodeColor(i: number): string;
}

declare global {
  interface Window {
    __netloomMap?: MapDebug;
  }
}

export async function networkPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal, search } = ctx;
  root.classList.add("map-page");

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
  const container = h("div", { class: "map", id: "map", tabindex: "0", "aria-label": "Network map" });
  const overlay = h("div", { class: "map-overlay" }, loading("Loading the fabric layout…"));
  const jobId = search.get("job");
  const jobBar = h("div", { class: "job-bar", role: "status", hidden: !jobId });
  root.append(
    h(
      "div",
      { class: "map-toolbar" },
      h("div", { class: "search-wrap" }, searchBox, results),
      zoomIn,
      zoomOut,
      zoomReset,
      legend,
      stats,
    ),
    jobBar,
    h("div", { class: "map-wrap" }, container, overlay, info),
  );

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
  /** " · fabric NAME" for node i in a view of several fabrics, else "". */
  const fabricOf = (i: number): string => (layout.fabrics && layout.fabric ? ` · fabric ${layout.fabrics[layout.fabric[i] ?? 0] ?? "?"}` : "");
  if (signal.aborted) return;
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
  // Links from a host to its leaf, per group: [link index, host end is A].
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
  const groupUp = new Map<number, number>(); // leaf -> quantized max utilization hosts→leaf
  const groupDown = new Map<number, number>();
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

  // Live state read by the reducers.
  let util = new Uint8Array(2 * m).fill(255);
  let errors = new Uint8Array(Math.ceil(n / 8));
  let expanded = !collapsible;
  let selected = -1;
  // Hosts highlighted for a job (?job=ID), and the collapsed groups holding them.
  let highlighted = new Set<number>();
  let highlightedGroups = new Set<number>();
  // The job's link directions: bit 0 A → B, bit 1 B → A, per link index;
  // per collapsed group, bit 0 up (hosts → leaf), bit 1 down.
  let jobDirs = new Map<number, number>();
  let jobGroupDirs = new Map<number, number>();
  let jobDirList: MapDebug["jobDirections"] = [];
  let hoveredEdge: string | null = null;
  let sweep = -1;
  let updates = 0;
  let lastUpdateMs = 0;
  const hasError = (i: number) => (errors[i >> 3]! & (1 << (i & 7))) !== 0;

  const nodeColor = (i: number): string => {
    if (i === selected) return HIGHLIGHT_COLOR;
    if (highlighted.has(i)) return JOB_COLOR;
    if (layout.type[i] === 1) return hasError(i) ? ERROR_COLOR : SWITCH_COLOR[Math.min(layout.level[i]! - 1, SWITCH_COLOR.length - 1)]!;
    return hasError(i) ? ERROR_COLOR : HOST_COLOR;
  };

  const renderer = new Sigma(graph, container, {
    defaultEdgeType: "halves",
    edgeProgramClasses: { halves: HalfEdgeProgram },
    enableEdgeEvents: true,
    renderEdgeLabels: false,
    labelRenderedSizeThreshold: 9,
    labelDensity: 0.5,
    labelFont: "system-ui, sans-serif",
    labelSize: 11,
    minCameraRatio: 0.003,
    maxCameraRatio: 3,
    stagePadding: 24,
    zIndex: true,
    nodeReducer: (key, data) => {
      const out = { ...data };
      if (key.charCodeAt(0) === 103 /* g */) {
        out.hidden = expanded;
        out.color = highlightedGroups.has(data.group as number) ? JOB_COLOR : HOST_COLOR;
        if (highlightedGroups.has(data.group as number)) out.zIndex = 2;
        return out;
      }
      const i = data.i as number;
      out.color = nodeColor(i);
      if (layout.level[i] === 0 && !expanded && i !== selected) out.hidden = true;
      if (hasError(i)) {
        out.size = (data.size as number) + 1.5;
        out.zIndex = 1;
      }
      if (highlighted.has(i)) {
        out.size = (data.size as number) + 3;
        out.zIndex = 2;
        out.hidden = false;
        out.forceLabel = highlighted.size <= 24;
      }
      if (i === selected) {
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
        const bits = jobGroupDirs.get(leaf) ?? 0;
        out.hidden = expanded;
        out.color = bits & 1 ? JOB_COLOR : UTIL_COLOR[groupUp.get(leaf) ?? 255];
        out.color2 = bits & 2 ? JOB_COLOR : UTIL_COLOR[groupDown.get(leaf) ?? 255];
        if (bits) out.zIndex = 1;
      } else {
        const j = data.j as number;
        // A direction the job's traffic crosses is drawn in the job's
        // colour at its sending half.
        const bits = jobDirs.get(j) ?? 0;
        out.color = bits & 1 ? JOB_COLOR : UTIL_COLOR[util[2 * j]!];
        out.color2 = bits & 2 ? JOB_COLOR : UTIL_COLOR[util[2 * j + 1]!];
        if (bits) out.zIndex = 1;
      }
      if (key === hoveredEdge) out.zIndex = 1;
      return out as typeof data;
    },
  });
  signal.addEventListener("abort", () => renderer.kill());

  // Re-colours from a sweep message; measured with performance marks.
  const recolor = (msg: SweepMessage): void => {
    if (msg.version !== layout.version || msg.links !== m) return; // topology event will reload
    performance.mark("netloom:map:update-start");
    util = decode(msg.util);
    errors = decode(msg.errors);
    if (collapsible) {
      for (const [leaf, list] of groupLinks) {
        let up = -1;
        let down = -1;
        for (const [j, hostIsA] of list) {
          const u = util[2 * j + (hostIsA ? 0 : 1)]!;
          const d = util[2 * j + (hostIsA ? 1 : 0)]!;
          if (u !== 255) up = Math.max(up, u);
          if (d !== 255) down = Math.max(down, d);
        }
        groupUp.set(leaf, up < 0 ? 255 : up);
        groupDown.set(leaf, down < 0 ? 255 : down);
      }
    }
    sweep = msg.sweep;
    updates++;
    renderer.refresh({ skipIndexation: true, partialGraph: { nodes: graph.nodes(), edges: graph.edges() } });
    performance.mark("netloom:map:update-end");
    lastUpdateMs = performance.measure("netloom:map:update", "netloom:map:update-start", "netloom:map:update-end").duration;
    const hot = countHot(util);
    stats.textContent =
      `${fmt.count(n)} nodes · ${fmt.count(m)} links · ` +
      (t.mode === "live" ? `sweep ${msg.sweep} · ` : `${fmt.time(msg.time)} · `) +
      `${hot} link directions ≥ 80% · ${msg.error_nodes} nodes with errors`;
    container.dataset.sweep = String(msg.sweep);
  };

  const setExpanded = (e: boolean) => {
    if (e === expanded) return;
    expanded = e;
    renderer.refresh();
  };
  renderer.getCamera().on("updated", (state) => {
    if (collapsible) setExpanded(state.ratio < EXPAND_RATIO);
  });

  // Hover and click.
  const linkId = (j: number) => {
    const a = layout.edges[2 * j]!;
    const b = layout.edges[2 * j + 1]!;
    return `${layout.guid[a]}:${layout.ports[2 * j]}-${layout.guid[b]}:${layout.ports[2 * j + 1]}`;
  };
  const pctOf = (q: number) => (q === 255 ? "no data" : fmt.pct(q / 2.54));
  renderer.on("enterNode", ({ node }) => {
    const d = graph.getNodeAttributes(node);
    if (d.group !== undefined) {
      const leaf = d.group as number;
      info.textContent = `${d.label as string} · busiest host link: up ${pctOf(groupUp.get(leaf) ?? 255)}, down ${pctOf(groupDown.get(leaf) ?? 255)} · click to zoom in`;
      return;
    }
    const i = d.i as number;
    info.textContent = `${layout.name[i]} · ${layout.type[i] === 1 ? "switch, level " + layout.level[i] : "host"}${fabricOf(i)} · GUID ${layout.guid[i]} · LID ${layout.lid[i]}${hasError(i) ? " · errors in the last sweep" : ""}`;
  });
  renderer.on("enterEdge", ({ edge }) => {
    hoveredEdge = edge;
    const d = graph.getEdgeAttributes(edge);
    if (d.group !== undefined) return;
    const j = d.j as number;
    const a = layout.edges[2 * j]!;
    const b = layout.edges[2 * j + 1]!;
    info.textContent = `${layout.name[a]}:${layout.ports[2 * j]} → ${layout.name[b]}:${layout.ports[2 * j + 1]} ${pctOf(util[2 * j]!)} · back ${pctOf(util[2 * j + 1]!)} · ${fmt.rate(layout.capacity[j]!)} capacity`;
  });
  renderer.on("leaveEdge", () => (hoveredEdge = null));
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
    navigate(`/links/${linkId(d.j as number)}${timeQuery(t)}`);
  });

  const camera = renderer.getCamera();
  zoomIn.addEventListener("click", () => void camera.animatedZoom({ duration: 200 }));
  zoomOut.addEventListener("click", () => void camera.animatedUnzoom({ duration: 200 }));
  zoomReset.addEventListener("click", () => void camera.animatedReset({ duration: 200 }));
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

  // Search by name, GUID or LID.
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
    selected = i;
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
        `${layout.name[i]}${fabricOf(i)} · GUID ${layout.guid[i]} · LID ${layout.lid[i]} · `,
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
            ` ${layout.type[i] === 1 ? "switch" : "host"}${fabricOf(i)} · LID ${layout.lid[i]} · ${layout.guid[i]}`,
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

  window.__netloomMap = {
    version: layout.version,
    nodes: n,
    links: m,
    get sweep() {
      return sweep;
    },
    get updates() {
      return updates;
    },
    get lastUpdateMs() {
      return lastUpdateMs;
    },
    get expanded() {
      return expanded;
    },
    get util() {
      return util;
    },
    linkId,
    edgeColors: (j: number) => {
      const d = renderer.getEdgeDisplayData("e" + j) as { color: string; color2?: string } | undefined;
      return [d?.color ?? "", d?.color2 ?? ""];
    },
    nodeColor,
    get highlighted() {
      return [...highlighted].sort((a, b) => a - b);
    },
    get jobDirections() {
      return jobDirList;
    },
    job: jobId,
  };

  // First frame: the whole map with whatever colours have arrived.
  apply = recolor;
  if (pending) recolor(pending);
  else renderer.refresh();
  stats.textContent ||= `${fmt.count(n)} nodes · ${fmt.count(m)} links`;
  overlay.remove();
  const initial = search.get("node");
  if (initial) {
    const i = layout.guid.indexOf(initial);
    if (i >= 0) select(i, false);
  }
  if (jobId) {
    // The job's hosts: its node names matched to host names ("n7" is host
    // "n7 HCA-1"), refreshed while live since a running job may grow.
    const byName = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      if (layout.level[i] !== 0) continue;
      const name = layout.name[i]!;
      byName.set(name, i);
      const first = name.split(" ")[0]!;
      if (!byName.has(first)) byName.set(first, i);
    }
    // Each link by its id, and which layout end is its A end.
    const byLink = new Map<string, number>();
    for (let j = 0; j < m; j++) byLink.set(linkId(j), j);
    const portOf = (j: number, end: 0 | 1) => `${layout.guid[layout.edges[2 * j + end]!]}:${layout.ports[2 * j + end]}`;
    const showJob = async () => {
      try {
        // Its hosts, and the link directions its traffic crosses (every
        // byte attributed to it, GET /jobs/{job}/links).
        const [r, lr] = await Promise.all([
          get<{ nodes: NodeView[] }>(jobPath(jobId, "/nodes"), {}, signal),
          get<{ links: JobOnLink[] }>(jobPath(jobId, "/links"), { limit: 100000 }, signal).catch(() => null),
        ]);
        const hit = new Set<number>();
        const missing: string[] = [];
        for (const nd of r.nodes) {
          const i = byName.get(nd.node) ?? byName.get(nd.node.split(".")[0]!);
          if (i === undefined) missing.push(nd.node);
          else hit.add(i);
        }
        const dirs = new Map<number, number>();
        const groups = new Map<number, number>();
        const list: MapDebug["jobDirections"] = [];
        let offMap = 0;
        for (const l of lr?.links ?? []) {
          const j = byLink.get(l.link.id);
          const from = `${l.from.guid}:${l.from.port}`;
          const dir = j === undefined ? -1 : from === portOf(j, 0) ? 0 : from === portOf(j, 1) ? 1 : -1;
          if (j === undefined || dir < 0) {
            offMap++;
            continue;
          }
          dirs.set(j, (dirs.get(j) ?? 0) | (1 << dir));
          list.push({ j, dir, link: l.link.id, from, bytes: l.bytes });
          // A host link hidden in its leaf's group lights the group's line.
          const a = layout.edges[2 * j]!;
          const b = layout.edges[2 * j + 1]!;
          const host = layout.level[a] === 0 ? a : layout.level[b] === 0 ? b : -1;
          const g = host >= 0 ? layout.group[host]! : -1;
          if (collapsible && g >= 0) groups.set(g, (groups.get(g) ?? 0) | ((dir === 0) === (host === a) ? 1 : 2));
        }
        list.sort((x, y) => x.j - y.j || x.dir - y.dir);
        highlighted = hit;
        highlightedGroups = new Set([...hit].map((i) => layout.group[i]!).filter((g) => g >= 0));
        jobDirs = dirs;
        jobGroupDirs = groups;
        jobDirList = list;
        renderer.refresh();
        container.dataset.jobHosts = String(hit.size);
        container.dataset.jobDirections = String(list.length);
        jobBar.replaceChildren();
        const nd = list.length;
        append(
          jobBar,
          h("span", { class: "swatch round", style: { background: JOB_COLOR } }),
          h("span", {}, "Job "),
          link(`/jobs/${encodeURIComponent(jobId)}${timeQuery(t)}`, jobId),
          h("span", {}, `: ${hit.size} of its ${r.nodes.length} node${r.nodes.length === 1 ? "" : "s"} highlighted`),
          hit.size ? h("span", { class: "dim-text" }, ` (${[...hit].map((i) => layout.name[i]!.split(" ")[0]).slice(0, 12).join(", ")}${hit.size > 12 ? ", …" : ""})`) : null,
          h(
            "span",
            { class: "job-dirs" },
            lr === null
              ? " · the link directions it crosses are not known here (no link attribution)"
              : nd
                ? ` · its traffic crosses ${nd} link direction${nd === 1 ? "" : "s"}, drawn in its colour at the sending half of each link`
                : " · no link traffic attributed to it",
          ),
          offMap ? h("span", { class: "warn-text" }, ` · ${offMap} of its link directions are not on this map`) : null,
          missing.length ? h("span", { class: "warn-text" }, ` · not in this fabric: ${missing.slice(0, 6).join(", ")}${missing.length > 6 ? ", …" : ""}`) : null,
          h(
            "button",
            {
              type: "button",
              class: "btn small",
              onclick: () => {
                const q = new URLSearchParams(location.search);
                q.delete("job");
                navigate(location.pathname + (q.toString() ? "?" + q.toString() : ""));
              },
            },
            "Clear",
          ),
        );
      } catch (err) {
        if (signal.aborted) return;
        jobBar.replaceChildren(h("span", { class: "warn-text" }, `Job ${jobId}: ${err instanceof Error ? err.message : String(err)}`));
      }
    };
    jobBar.replaceChildren(h("span", {}, `Loading the nodes of job ${jobId}…`));
    void showJob();
    if (t.mode === "live") refreshOnSweep(() => void showJob(), signal, 5000);
  }
  requestAnimationFrame(() => {
    if (signal.aborted) return;
    performance.mark("netloom:map:first-frame");
    container.dataset.ready = "true";
  });
}

function countHot(util: Uint8Array): number {
  let k = 0;
  for (let i = 0; i < util.length; i++) if (util[i]! >= 203 && util[i] !== 255) k++;
  return k;
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
