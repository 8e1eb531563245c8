// The job page: summary, per-node and per-process tables and time series,
// rank- and node-level communication matrices per class, message sizes,
// time per MPI function per rank, where the ranks wait before collectives
// (with `netloom run --waits`) and which ranks the others wait for, regions, the links the job crosses (once
// the daemon attributes link traffic to jobs) and a link to its nodes on
// the network map. Refreshed live while the job runs. A regular user (their
// own jobs only) gets no map and no node pages: those are the fabric's; the
// links list stays, with other users' jobs shown as "other job".
import { ApiError, get, isAdmin } from "../api";
import { chartError, chartFrame, drawChart, PALETTE } from "../chart";
import { h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import type { FunctionTotal, GpuSummary, Histogram, JobDetail, JobSeries, MatrixResponse, ModelPrediction, ModelResult, NodeView, Placement, PlacementCost, PlacementFormat, PlacementLink, ProcessView, Profile, RegionTotal, Why, WhyLink } from "../jobs/api";
import { jobPath } from "../jobs/api";
import { buffersView, hasBuffers, hasNccl, ncclView } from "../jobs/gpu";
import { joinReorders, reorderView } from "../jobs/reorder";
import { heatmap } from "../jobs/heatmap";
import { histogramBars } from "../jobs/histogram";
import { checkNote, explainedText, flagged, jobLabel } from "../jobs/linkjobs";
import { profileChart, seconds, SETUP_FUNCTIONS } from "../jobs/profile";
import { waitsView } from "../jobs/waits";
import type { PageContext } from "../router";
import { setQuery } from "../router";
import { table } from "../table";
import { readTime, timeQuery } from "../time";
import { duration, stateBadge } from "./jobs";
import { metric } from "./link";

/** Live refresh period while the job runs. */
const JOB_REFRESH_MS = 3000;
/** Time series are drawn for at most this many nodes or ranks. */
const MAX_LINES = 16;

const CLASSES: [string, string][] = [
  ["p2p", "Point-to-point"],
  ["coll", "Collective"],
  ["rma", "One-sided"],
  ["all", "All"],
];
const METRICS: [string, string][] = [
  ["bytes", "Bytes"],
  ["msgs", "Messages"],
];

export async function jobPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal, search } = ctx;
  const id = ctx.params.job!;
  const tq = timeQuery(t);
  const view = {
    mclass: CLASSES.some(([c]) => c === search.get("mclass")) ? search.get("mclass")! : "p2p",
    mmetric: search.get("mmetric") === "msgs" ? "msgs" : "bytes",
    hrank: search.get("hrank") ?? "",
    setup: search.get("setup") === "1",
    outside: search.get("outside") === "1",
  };
  const saveView = () => {
    const q = new URLSearchParams(location.search);
    const put = (k: string, v: string, def: string) => (v === def ? q.delete(k) : q.set(k, v));
    put("mclass", view.mclass, "p2p");
    put("mmetric", view.mmetric, "bytes");
    put("hrank", view.hrank, "");
    put("setup", view.setup ? "1" : "0", "0");
    put("outside", view.outside ? "1" : "0", "0");
    setQuery(q);
  };

  // Skeleton: every section has its final place and a loading state.
  const title = h("h1", {}, `Job ${id}`);
  const sub = h("p", { class: "sub" }, "\u00a0");
  const admin = isAdmin();
  const mapLink = admin ? link(`/network?job=${encodeURIComponent(id)}${tq ? "&" + tq.slice(1) : ""}`, "Show its nodes on the network map") : null;
  mapLink?.classList.add("btn");
  const cards = h("div", { class: "cards one" }, h("div", { class: "card" }, loading()));
  const nodesBox = h("div", {}, loading("Loading nodes…"));
  const procsBox = h("div", {}, loading("Loading processes…"));
  const charts = {
    nodeBytes: chartFrame("Sent per node (bytes/s)"),
    nodeCpu: chartFrame("CPU per node (% of one core)"),
    rankBytes: chartFrame("Sent per rank (bytes/s)"),
    rankMpi: chartFrame("Time in MPI per rank (% of wall time)"),
    // Only for a job run with --waits: the waits per interval.
    rankWait: chartFrame("Waiting per rank (% of wall time: before collectives and for late senders)"),
  };
  charts.rankWait.hidden = true;
  const rankHeat = heatmap("Rank to rank");
  const nodeHeat = heatmap("Node to node");
  const seg = (items: [string, string][], current: () => string, set: (v: string) => void, label: string) => {
    const buttons = items.map(([v, l]) =>
      h(
        "button",
        {
          type: "button",
          class: "seg",
          "data-value": v,
          "aria-pressed": String(v === current()),
          onclick: () => {
            set(v);
            for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.value === current()));
            saveView();
            void loadMatrices();
          },
        },
        l,
      ),
    );
    return h("div", { class: "segmented light", role: "group", "aria-label": label }, ...buttons);
  };
  const matrixTools = h(
    "div",
    { class: "panel-tools" },
    seg(CLASSES, () => view.mclass, (v) => (view.mclass = v), "Traffic class"),
    seg(METRICS, () => view.mmetric, (v) => (view.mmetric = v), "Metric"),
  );
  const histRank = h("select", { class: "small-select", "aria-label": "Message sizes of" }, h("option", { value: "" }, "All ranks"));
  histRank.addEventListener("change", () => {
    view.hrank = histRank.value;
    saveView();
    void loadHistogram();
  });
  const histBox = h("div", { class: "histo-box" }, loading());
  const regionsBox = h("div", {}, loading("Loading regions…"));
  const setupBox = h("input", { type: "checkbox", id: "profile-setup", checked: view.setup });
  const outsideBox = h("input", { type: "checkbox", id: "profile-outside", checked: view.outside });
  for (const [box, key] of [
    [setupBox, "setup"],
    [outsideBox, "outside"],
  ] as const) {
    box.addEventListener("change", () => {
      view[key] = box.checked;
      saveView();
      drawProfile();
    });
  }
  const profileBox = h("div", { class: "profile-box" }, loading("Loading the profile…"));
  const functionsBox = h("div", {}, "");
  const waitsBox = h("div", { class: "waits-box" }, loading("Loading waits…"));
  // GPU jobs only: shown once the daemon has buffer kinds or NCCL
  // operations for the job.
  const gpuBox = h("div", {}, "");
  const ncclBox = h("div", {}, "");
  const gpuPanel = panel("GPU buffers: paths between host and device memory", gpuBox);
  const ncclPanel = panel("NCCL operations", ncclBox);
  gpuPanel.classList.add("gpu-panel");
  ncclPanel.classList.add("nccl-panel");
  gpuPanel.hidden = ncclPanel.hidden = true;
  // Jobs that reordered their ranks themselves (netloom_reorder) only.
  const reorderBox = h("div", {}, "");
  const reorderPanel = panel("Rank reordering (netloom_reorder)", reorderBox);
  reorderPanel.classList.add("reorder-panel");
  reorderPanel.hidden = true;
  const linksBox = h("div", {}, loading("Loading links…"));
  const placeBox = h("div", {}, loading("Computing placement advice…"));
  const modelBox = h("div", { class: "model-box" }, loading("Replaying the job's trace…"));
  const placeFormat = h(
    "select",
    { class: "small-select", "aria-label": "Placement file format" },
    h("option", { value: "openmpi" }, "Open MPI rankfile"),
    h("option", { value: "mpich" }, "MPICH machine file"),
    h("option", { value: "slurm" }, "Slurm host file"),
  );
  placeFormat.addEventListener("change", () => void loadPlacement());

  root.append(
    h(
      "div",
      { class: "page-head" },
      h("nav", { class: "crumbs" }, link(`/jobs${tq}`, "Jobs"), " / job"),
      h("div", { class: "head-row" }, title, mapLink),
      sub,
    ),
    cards,
    panel("Nodes", nodesBox),
    h("div", { class: "grid2" }, charts.nodeBytes, charts.nodeCpu),
    panel("Processes", procsBox),
    reorderPanel,
    h("div", { class: "grid2" }, charts.rankBytes, charts.rankMpi, charts.rankWait),
    panel("Communication matrix", h("div", { class: "heatmaps" }, rankHeat.el, nodeHeat.el), matrixTools),
    h(
      "div",
      { class: "grid2" },
      panel("Point-to-point message sizes", histBox, histRank),
      panel("Regions", regionsBox),
    ),
    panel(
      "Time per MPI function",
      h("div", {}, profileBox, functionsBox),
      h(
        "div",
        { class: "panel-tools" },
        h("label", { class: "check" }, setupBox, " MPI_Init / Finalize"),
        h("label", { class: "check" }, outsideBox, " time outside MPI"),
      ),
    ),
    gpuPanel,
    ncclPanel,
    panel("Where the ranks wait", waitsBox),
    panel("Links the job's traffic crosses", linksBox),
    panel("Placement advice", placeBox, placeFormat),
    panel("What would help", modelBox),
  );

  let detail: JobDetail | null = null;

  const loadDetail = async () => {
    const d = await get<JobDetail>(jobPath(id), {}, signal);
    detail = d;
    const reorders = joinReorders(d.processes);
    reorderPanel.hidden = reorders.length === 0;
    if (reorders.length > 0) reorderBox.replaceChildren(reorderView(reorders));
    const j = d.job;
    title.textContent = `Job ${j.id}`;
    sub.replaceChildren(
      stateBadge(j),
      ` ${j.program || "unknown program"}`,
      j.user ? ` · user ${j.user}` : "",
      j.mpi_library ? ` · ${j.mpi_library}` : "",
      ` · started ${fmt.time(j.start)}`,
      j.end ? ` · ended ${fmt.time(j.end)}` : ` · last report ${fmt.ago(j.updated)}`,
    );
    root.dataset.state = j.state;
    cards.replaceChildren(
      h(
        "div",
        { class: "card job-summary" },
        h(
          "div",
          { class: "metrics" },
          metric("Ranks", j.reporting === j.ranks ? fmt.count(j.ranks) : `${fmt.count(j.reporting)} of ${fmt.count(j.ranks)}`),
          metric("Nodes", fmt.count(j.nodes)),
          metric("Duration", duration(j.duration_seconds)),
          metric("CPU", fmt.pct(j.cpu_percent)),
          metric("MPI", fmt.pct(j.mpi_percent)),
          metric("Memory", fmt.bytes(j.memory_bytes)),
          metric("Sent", fmt.bytes(j.total.bytes)),
          metric("Inter-node", fmt.bytes(j.inter_node.bytes)),
          metric("Intra-node", fmt.bytes(j.intra_node.bytes)),
          metric("Point-to-point", fmt.bytes(j.traffic.p2p.bytes)),
          metric("Collective", fmt.bytes(j.traffic.coll.bytes)),
          metric("One-sided", fmt.bytes(j.traffic.rma.bytes)),
          j.agent_datagrams_dropped ? metric("Agent drops", fmt.count(j.agent_datagrams_dropped), "bad") : null,
        ),
      ),
    );
    nodesBox.replaceChildren(
      table<NodeView>({
        label: "Nodes of the job",
        param: "n",
        rows: d.nodes,
        defaultSort: "node",
        defaultDir: "asc",
        pageSize: 20,
        empty: "No node has reported yet.",
        columns: [
          { key: "node", label: "Node", value: (n) => n.node, cell: (n) => (admin ? link(`/nodes/${encodeURIComponent(n.node)}${tq}`, n.node) : n.node) },
          { key: "ranks", label: "Ranks", value: (n) => n.ranks.length, cell: (n) => rankList(n.ranks), numeric: true },
          { key: "cpu", label: "CPU", value: (n) => n.cpu_percent, cell: (n) => fmt.pct(n.cpu_percent), numeric: true, title: "Sum over its ranks: 200% is two cores busy" },
          { key: "mpi", label: "MPI time", value: (n) => n.mpi_seconds, cell: (n) => seconds(n.mpi_seconds), numeric: true },
          { key: "mem", label: "Memory", value: (n) => n.memory_bytes, cell: (n) => fmt.bytes(n.memory_bytes), numeric: true },
          { key: "sent", label: "Sent", value: (n) => n.total.bytes, cell: (n) => fmt.bytes(n.total.bytes), numeric: true },
          { key: "inter", label: "Inter-node", value: (n) => n.inter_node.bytes, cell: (n) => fmt.bytes(n.inter_node.bytes), numeric: true },
          { key: "intra", label: "Intra-node", value: (n) => n.intra_node.bytes, cell: (n) => fmt.bytes(n.intra_node.bytes), numeric: true },
          { key: "p2p", label: "P2P", value: (n) => n.traffic.p2p.bytes, cell: (n) => fmt.bytes(n.traffic.p2p.bytes), numeric: true },
          { key: "coll", label: "Coll", value: (n) => n.traffic.coll.bytes, cell: (n) => fmt.bytes(n.traffic.coll.bytes), numeric: true },
          { key: "rma", label: "RMA", value: (n) => n.traffic.rma.bytes, cell: (n) => fmt.bytes(n.traffic.rma.bytes), numeric: true },
        ],
      }),
    );
    procsBox.replaceChildren(
      table<ProcessView>({
        label: "Processes of the job",
        param: "p",
        rows: d.processes,
        defaultSort: "rank",
        defaultDir: "asc",
        pageSize: 32,
        empty: "No rank has reported yet.",
        columns: [
          { key: "rank", label: "Rank", value: (p) => p.rank, numeric: true },
          { key: "node", label: "Node", value: (p) => p.node },
          { key: "host", label: "Host · PID", value: (p) => p.host, cell: (p) => `${p.host} · ${p.pid}` },
          { key: "cpu", label: "CPU", value: (p) => p.cpu_percent, cell: (p) => fmt.pct(p.cpu_percent), numeric: true },
          { key: "mpi", label: "MPI", value: (p) => p.mpi_percent, cell: (p) => fmt.pct(p.mpi_percent), numeric: true, title: "Time in MPI / wall time" },
          { key: "mem", label: "Memory", value: (p) => p.vm_rss, cell: (p) => fmt.bytes(p.vm_rss), numeric: true },
          { key: "sent", label: "Sent", value: (p) => p.total.bytes, cell: (p) => fmt.bytes(p.total.bytes), numeric: true },
          { key: "inter", label: "Inter-node", value: (p) => p.inter_node.bytes, cell: (p) => fmt.bytes(p.inter_node.bytes), numeric: true },
          { key: "intra", label: "Intra-node", value: (p) => p.intra_node.bytes, cell: (p) => fmt.bytes(p.intra_node.bytes), numeric: true },
          { key: "p2p", label: "P2P", value: (p) => p.traffic.p2p.bytes, cell: (p) => fmt.bytes(p.traffic.p2p.bytes), numeric: true },
          { key: "coll", label: "Coll", value: (p) => p.traffic.coll.bytes, cell: (p) => fmt.bytes(p.traffic.coll.bytes), numeric: true },
          { key: "rma", label: "RMA", value: (p) => p.traffic.rma.bytes, cell: (p) => fmt.bytes(p.traffic.rma.bytes), numeric: true },
          { key: "state", label: "State", value: (p) => (p.final ? "finalized" : "running"), cell: (p) => h("span", { class: `badge ${p.final ? "" : "run"}` }, p.final ? "finalized" : "running") },
        ],
      }),
    );
    // Histogram rank choices follow the ranks that reported.
    if (histRank.options.length !== d.processes.length + 1) {
      histRank.replaceChildren(h("option", { value: "" }, "All ranks"), ...d.processes.map((p) => h("option", { value: String(p.rank) }, `Rank ${p.rank}`)));
      histRank.value = view.hrank;
    }
    return d;
  };

  const seriesRange = (): Record<string, string> => (t.mode === "range" ? { from: String(t.from), to: String(t.to) } : {});

  const loadSeries = async () => {
    const d = detail!;
    try {
      const nodes = [...d.nodes].sort((a, b) => b.total.bytes - a.total.bytes).slice(0, MAX_LINES);
      const ranks = [...d.processes].sort((a, b) => b.total.bytes - a.total.bytes || a.rank - b.rank).slice(0, MAX_LINES);
      // One request for all the nodes' series and one for the ranks'.
      const many = (key: "nodes" | "ranks", names: string[]) =>
        names.length === 0
          ? Promise.resolve([] as JobSeries[])
          : get<{ series: JobSeries[] }>(jobPath(id, "/series"), { [key]: names.join(","), ...seriesRange() }, signal).then((r) => r.series);
      const [ns, rs] = await Promise.all([many("nodes", nodes.map((n) => n.node)), many("ranks", ranks.map((p) => String(p.rank)))]);
      const nodeAl = alignJob(ns);
      const rankAl = alignJob(rs);
      const lines = (al: ReturnType<typeof alignJob>, names: string[], key: string) =>
        names.map((name, k) => ({ label: name, values: al.col(k, key), color: PALETTE[k % PALETTE.length]!, dash: k >= PALETTE.length ? [4, 3] : undefined, spanGaps: true }));
      const nodeNames = nodes.map((n) => n.node);
      const rankNames = ranks.map((p) => `rank ${p.rank}`);
      drawChart(charts.nodeBytes, { title: "", time: nodeAl.time, format: fmt.rate, lines: lines(nodeAl, nodeNames, "bytes_per_second") }, signal);
      drawChart(charts.nodeCpu, { title: "", time: nodeAl.time, format: fmt.pct, lines: lines(nodeAl, nodeNames, "cpu_percent") }, signal);
      drawChart(charts.rankBytes, { title: "", time: rankAl.time, format: fmt.rate, lines: lines(rankAl, rankNames, "bytes_per_second") }, signal);
      drawChart(charts.rankMpi, { title: "", time: rankAl.time, format: fmt.pct, lines: lines(rankAl, rankNames, "mpi_percent") }, signal);
      charts.rankWait.hidden = !rs.some((s) => s.series.values["wait_seconds"]?.some((v) => v > 0));
      if (!charts.rankWait.hidden) drawChart(charts.rankWait, { title: "", time: rankAl.time, format: fmt.pct, lines: lines(rankAl, rankNames, "wait_percent") }, signal);
      for (const [f, what, total] of [
        [charts.nodeBytes, "nodes", d.nodes.length],
        [charts.rankBytes, "ranks", d.processes.length],
      ] as const) {
        f.dataset.lines = String(Math.min(total, MAX_LINES));
        if (total > MAX_LINES) f.querySelector("figcaption")!.textContent = `Sent per ${what === "nodes" ? "node" : "rank"} (bytes/s) · the ${MAX_LINES} ${what} that sent most`;
      }
    } catch (err) {
      if (signal.aborted) return;
      for (const f of Object.values(charts)) chartError(f, err);
    }
  };

  const loadMatrices = async () => {
    const q = { class: view.mclass, metric: view.mmetric };
    await Promise.all(
      (
        [
          [rankHeat, "rank"],
          [nodeHeat, "node"],
        ] as const
      ).map(async ([hm, level]) => {
        try {
          hm.set(await get<MatrixResponse>(jobPath(id, "/matrix"), { level, format: "sparse", ...q }, signal));
        } catch (err) {
          if (signal.aborted) return;
          hm.fail(err instanceof Error ? err.message : String(err));
        }
      }),
    );
  };

  const loadHistogram = async () => {
    try {
      const r = await get<{ histogram: Histogram }>(jobPath(id, "/histogram"), { rank: view.hrank }, signal);
      const hg = r.histogram;
      const counts = view.hrank === "" ? hg.job : (hg.per_rank[hg.ranks.indexOf(Number(view.hrank))] ?? []);
      histBox.replaceChildren(histogramBars(counts, hg.bin_min_bytes, view.hrank === "" ? "No point-to-point messages yet." : `Rank ${view.hrank} sent no point-to-point messages.`));
    } catch (err) {
      if (signal.aborted) return;
      histBox.replaceChildren(h("div", { class: "state error" }, err instanceof Error ? err.message : String(err)));
    }
  };

  const loadRegions = async () => {
    try {
      const r = await get<{ regions: RegionTotal[] }>(jobPath(id, "/regions"), {}, signal);
      regionsBox.replaceChildren(
        table<RegionTotal>({
          label: "Regions",
          param: "r",
          rows: r.regions,
          defaultSort: "time",
          defaultDir: "desc",
          pageSize: 20,
          empty: "No regions: mark phases with netloom_region_begin/end or MPI_Pcontrol.",
          columns: [
            { key: "name", label: "Region", value: (x) => x.name },
            { key: "entries", label: "Entries", value: (x) => x.entries, cell: (x) => fmt.count(x.entries), numeric: true },
            { key: "time", label: "Time", value: (x) => x.time_ns, cell: (x) => seconds(x.time_ns / 1e9), numeric: true, title: "Wall time inside, summed over ranks" },
            { key: "mpi", label: "MPI time", value: (x) => x.mpi_time_ns, cell: (x) => seconds(x.mpi_time_ns / 1e9), numeric: true },
            { key: "p2p", label: "P2P", value: (x) => x.p2p.bytes, cell: (x) => fmt.bytes(x.p2p.bytes), numeric: true },
            { key: "coll", label: "Coll", value: (x) => x.coll.bytes, cell: (x) => fmt.bytes(x.coll.bytes), numeric: true },
            { key: "rma", label: "RMA", value: (x) => x.rma.bytes, cell: (x) => fmt.bytes(x.rma.bytes), numeric: true },
            { key: "ranks", label: "Ranks", value: (x) => x.ranks.length, cell: (x) => fmt.count(x.ranks.length), numeric: true },
          ],
        }),
      );
    } catch (err) {
      if (signal.aborted) return;
      regionsBox.replaceChildren(h("div", { class: "state error" }, err instanceof Error ? err.message : String(err)));
    }
  };

  let profile: Profile | null = null;
  const drawProfile = () => {
    if (!profile) return;
    profileBox.replaceChildren(profileChart(profile, { includeSetup: view.setup, showOutside: view.outside }));
    const nodes = new Map((detail?.processes ?? []).map((p) => [p.rank, p.node]));
    waitsBox.replaceChildren(waitsView(profile, (r) => nodes.get(r) ?? "", view.setup));
  };
  const loadProfile = async () => {
    try {
      const r = await get<{ profile: Profile }>(jobPath(id, "/profile"), {}, signal);
      profile = r.profile;
      drawProfile();
      const waits = r.profile.wait_ns !== undefined;
      functionsBox.replaceChildren(
        table({
          label: "MPI functions",
          param: "f",
          rows: r.profile.totals,
          defaultSort: "time",
          defaultDir: "desc",
          pageSize: 15,
          empty: "No MPI calls recorded yet.",
          rowClass: (x) => (SETUP_FUNCTIONS.includes(x.name) ? "dim" : ""),
          columns: [
            { key: "name", label: "Function", value: (x) => x.name, cell: (x) => h("code", {}, x.name) },
            { key: "calls", label: "Calls", value: (x) => x.calls, cell: (x) => fmt.count(x.calls), numeric: true },
            { key: "time", label: "Time", value: (x) => x.time_ns, cell: (x) => seconds(x.time_ns / 1e9), numeric: true, title: "Summed over ranks" },
            ...(waits
              ? [{ key: "wait", label: "Wait before", value: (x: FunctionTotal) => x.wait_ns ?? 0, cell: (x: FunctionTotal) => (x.wait_ns ? seconds(x.wait_ns / 1e9) : "–"), numeric: true, title: "Waiting for the last rank before the collective, or in MPI_Recv or MPI_Sendrecv for a late sender (--waits), summed over ranks" }]
              : []),
            { key: "pct", label: "% of MPI", value: (x) => x.mpi_percent, cell: (x) => fmt.pct(x.mpi_percent), numeric: true },
            { key: "sent", label: "Sent", value: (x) => x.bytes_sent, cell: (x) => fmt.bytes(x.bytes_sent), numeric: true },
            { key: "recv", label: "Received", value: (x) => x.bytes_received, cell: (x) => fmt.bytes(x.bytes_received), numeric: true },
            { key: "ranks", label: "Ranks", value: (x) => x.ranks, cell: (x) => fmt.count(x.ranks), numeric: true },
          ],
        }),
      );
    } catch (err) {
      if (signal.aborted) return;
      profileBox.replaceChildren(h("div", { class: "state error" }, err instanceof Error ? err.message : String(err)));
      waitsBox.replaceChildren(h("div", { class: "state error" }, err instanceof Error ? err.message : String(err)));
    }
  };

  // The GPU side: hidden for a job without it (and for a daemon that does
  // not serve it).
  const loadGpu = async () => {
    try {
      const r = await get<{ gpu: GpuSummary }>(jobPath(id, "/gpu"), { pairs: 0 }, signal);
      gpuPanel.hidden = !hasBuffers(r.gpu.buffers);
      ncclPanel.hidden = !hasNccl(r.gpu.nccl);
      if (!gpuPanel.hidden) gpuBox.replaceChildren(buffersView(r.gpu.buffers));
      if (!ncclPanel.hidden) ncclBox.replaceChildren(ncclView(r.gpu.nccl));
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiError && (err.status === 404 || err.status === 405)) return;
      gpuPanel.hidden = false;
      gpuBox.replaceChildren(h("div", { class: "state error" }, `GPU figures unavailable: ${err instanceof Error ? err.message : String(err)}`));
    }
  };

  // A finished job's links open over exactly the range of its links
  // table (its life, in whole seconds, from the why answer), so that the
  // link page's figures for the direction are the table's; a running
  // job's open live (the link page says its range).
  const linkWindow = (r: Why): string => {
    const j = detail?.job;
    if (t.mode !== "live" || !j || j.state === "running" || !j.end) return tq;
    const from = Date.parse(r.from) / 1000;
    const to = Date.parse(r.to) / 1000;
    return Number.isFinite(from) && Number.isFinite(to) && from < to ? `?from=${from}&to=${to}` : tq;
  };

  const trafficModelHelp: Record<string, string> = {
    physical: "Open MPI's monitoring told the agent the messages the library really sent, collectives decomposed into its trees and rings: these bytes crossed the links (netloom run --physical; the monitoring costs messages of 0 to 64 bytes 21 to 36% of their rate).",
    logical: "The application's MPI calls, a collective counted as its root sending to every rank: the library may have moved other bytes over other links. Under Open MPI, netloom run --physical turns its monitoring on for the physical traffic, at a cost of 21 to 36% of the rate of messages of 0 to 64 bytes (the agent alone: 3.5 to 6%).",
  };
  // Link attribution: the job's heaviest link directions, how loaded they
  // are and which other jobs share them (GET /jobs/{job}/why).
  const loadLinks = async () => {
    try {
      const r = await get<Why>(jobPath(id, "/why"), { limit: 20 }, signal);
      const a = r.attribution;
      const n = r.sharing_jobs?.length ?? 0;
      const note = a
        ? h(
            "p",
            { class: "panel-note links-note" },
            `${fmt.bytes(a.bytes)} of inter-node traffic routed over links in ${fmt.count(a.intervals)} intervals`,
            r.traffic_model ? h("span", { class: "traffic-model", title: trafficModelHelp[r.traffic_model] ?? "" }, ` · ${r.traffic_model === "physical" ? "as the MPI library sent it" : "as the application called MPI"} (${r.traffic_model})`) : "",
            a.unmapped_nodes.length ? h("span", { class: "warn-text" }, ` · nodes not found in the fabric: ${a.unmapped_nodes.join(", ")} (${fmt.bytes(a.unmapped_bytes)} left out)`) : "",
            // Only jobs that ran at the same time share a link: the jobs
            // just before and after it are not counted.
            n ? h("span", { class: "sharing" }, ` · shares links with ${n} other job${n === 1 ? "" : "s"} that ran at the same time`) : "",
          )
        : null;
      const range = h("p", { class: "panel-note links-range", "data-from": r.from, "data-to": r.to }, `Loads and explained shares over ${fmt.time(r.from)} – ${fmt.time(r.to)}, the job's life (its links open over the same range).`);
      const box = h("div", {});
      if (note) box.append(note);
      box.append(range);
      const win = linkWindow(r);
      box.append(
        table<WhyLink>({
          label: "Links crossed by the job",
          param: "l",
          rows: r.links,
          defaultSort: "bytes",
          pageSize: 20,
          rowClass: (x) => (flagged(x) ? "bad" : ""),
          empty: "No attributed link traffic: the job sent nothing between nodes yet, or its nodes are not in this fabric.",
          columns: [
            { key: "dir", label: "Link direction", value: (x) => `${x.from_description} → ${x.to_description}`, cell: (x) => link(`/links/${x.link.id}?job=${encodeURIComponent(id)}&${win.slice(1)}`.replace(/&$/, ""), `${x.from_description}:${x.from.port} → ${x.to_description}:${x.to.port}`) },
            { key: "bytes", label: "Job bytes", value: (x) => x.job_bytes, cell: (x) => fmt.bytes(x.job_bytes), numeric: true },
            { key: "share", label: "Job share", value: (x) => x.job_share_pct, cell: (x) => fmt.pct(x.job_share_pct), numeric: true, title: "Of the traffic monitored jobs put on this direction" },
            { key: "util", label: "Measured load", value: (x) => x.measured_utilization_pct, cell: (x) => (x.measured.measured ? fmt.pct(x.measured_utilization_pct) : "–"), numeric: true, title: "What the counters measured, as a share of capacity over the range above" },
            { key: "jobsutil", label: "Jobs' load", value: (x) => x.monitored_utilization_pct, cell: (x) => fmt.pct(x.monitored_utilization_pct), numeric: true, title: "What the monitored jobs put on it, as a share of capacity over the range above" },
            { key: "expl", label: "Explained", value: (x) => x.explained_pct ?? -1, cell: (x) => h("span", { class: flagged(x) ? "warn-text" : "", title: x.check?.message ?? "" }, explainedText(x)), numeric: true, title: "Monitored jobs' bytes ÷ measured bytes, at most 100%; ⚠ when they disagree (see below)" },
            {
              key: "others",
              label: "Other jobs at the same time",
              value: (x) => x.others.length,
              cell: (x) => (x.others.length ? h("span", {}, ...x.others.slice(0, 4).flatMap((o, k) => [k ? ", " : "", jobLabel(o, tq)]), x.others.length > 4 ? ` +${x.others.length - 4}` : "") : "none"),
            },
          ],
        }),
      );
      // The consistency check under each explained figure: where the jobs'
      // bytes and the counters disagree, say so with the likely cause.
      const checks = r.links.map((x) => checkNote(x, `${x.from_description}:${x.from.port} → ${x.to_description}:${x.to.port}: `)).filter((x): x is HTMLElement => x !== null);
      if (checks.length) box.append(h("div", { class: "explained-checks pad" }, ...checks));
      linksBox.replaceChildren(box);
    } catch (err) {
      if (signal.aborted) return;
      const missing = err instanceof ApiError && (err.status === 404 || err.status === 405);
      linksBox.replaceChildren(h("div", { class: "state empty" }, missing ? "Link attribution is not available from this daemon." : `Links unavailable: ${err instanceof Error ? err.message : String(err)}`));
    }
  };

  // Placement advice: where the ranks would cost the fabric least, what
  // that saves against the job as it ran and the usual placements, and the
  // launcher's file to download (GET /jobs/{job}/placement).
  const loadPlacement = async () => {
    try {
      const r = await get<Placement>(jobPath(id, "/placement"), { format: placeFormat.value as PlacementFormat }, signal);
      const predicted = h("div", { class: "placement-predicted" });
      placeBox.replaceChildren(placementView(r), predicted);
      // The advice's time, where a trace lets the model replay it: a gain
      // in bytes x hops is a promise only the replay can weigh.
      const j = detail?.job;
      if (r.nothing_to_gain) return;
      if (!j?.trace_dir || j.state !== "finished") {
        predicted.replaceChildren(
          h("p", { class: "panel-note" }, j?.trace_dir ? "Its predicted time comes when the job has ended." : "No predicted time: the job was not traced (netloom run --trace). Fewer bytes × hops shorten the job only as far as it waits on its traffic."),
        );
        return;
      }
      // The replay takes a while: the page is ready without it.
      predicted.replaceChildren(h("p", { class: "panel-note" }, "Replaying the advice…"));
      void get<ModelResult>(jobPath(id, "/model"), { placement: "advice" }, signal)
        .then((m) => predicted.replaceChildren(placementPrediction(m)))
        .catch((err) => {
          if (!signal.aborted) predicted.replaceChildren(h("p", { class: "panel-note" }, `No predicted time: ${err instanceof Error ? err.message : String(err)}`));
        });
    } catch (err) {
      if (signal.aborted) return;
      const missing = err instanceof ApiError && (err.status === 404 || err.status === 405);
      placeBox.replaceChildren(h("div", { class: "state empty" }, missing ? "Placement advice is not available from this daemon." : `No placement advice: ${err instanceof Error ? err.message : String(err)}`));
    }
  };

  const notTraced = "Run the job with netloom run --trace --output DIR (DIR where this daemon can read it) to see what a faster network or no network cost would change.";
  // What would help: the job's trace replayed (SimGrid) as it ran, on a
  // perfect network and with twice the bandwidth (GET /jobs/{job}/model).
  const loadModel = async () => {
    const j = detail?.job;
    if (!j?.trace_dir) {
      modelBox.replaceChildren(h("div", { class: "state empty" }, notTraced));
      return;
    }
    if (j.state !== "finished") {
      modelBox.replaceChildren(h("div", { class: "state empty" }, "The predictions come when the job has ended: its ranks write their traces at MPI_Finalize."));
      return;
    }
    try {
      modelBox.replaceChildren(modelView(await get<ModelResult>(jobPath(id, "/model"), {}, signal)));
    } catch (err) {
      if (signal.aborted) return;
      modelBox.replaceChildren(h("div", { class: "state empty" }, `No prediction: ${err instanceof Error ? err.message : String(err)}`));
    }
  };

  const loadAll = async () => {
    await loadDetail();
    await Promise.all([loadSeries(), loadMatrices(), loadHistogram(), loadRegions(), loadProfile(), loadGpu(), loadLinks()]);
  };
  await loadDetail();
  await Promise.all([loadSeries(), loadMatrices(), loadHistogram(), loadRegions(), loadProfile(), loadGpu(), loadLinks(), loadPlacement(), loadModel()]);
  root.dataset.ready = "true";

  // Live: refresh while the job runs, once more when it ends, then stop.
  if (detail!.job.state === "running") {
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      void loadAll()
        .then(() => {
          if (detail!.job.state !== "running") clearInterval(timer);
          root.dataset.refreshed = String(Number(root.dataset.refreshed ?? 0) + 1);
        })
        .catch(() => {})
        .finally(() => (busy = false));
    }, JOB_REFRESH_MS);
    signal.addEventListener("abort", () => clearInterval(timer));
  }
}

/** "0–3" or "0, 2, 5" or "0, 2, 5 … (40)". */
/** The advice: the predicted gain, the costs compared and the file. */
const modelSecs = (s: number) => `${s.toFixed(s < 1 ? 4 : 2)} s`;
/** A what-if's change against the replay as it ran (the API's vs_as_ran_pct). */
const vsAsRan = (p: ModelPrediction) => (p.vs_as_ran_pct == null ? "–" : `${p.vs_as_ran_pct <= 0 ? "−" : "+"}${fmt.pct(Math.abs(p.vs_as_ran_pct))}`);
/** The replay as it ran against the measured run: the model's calibration. */
const calibration = (r: ModelResult) =>
  `the replay as it ran takes ${modelSecs(r.as_ran.elapsed_seconds)}, ${fmt.pct((100 * r.as_ran.elapsed_seconds) / r.measured.elapsed_seconds)} of the measured ${modelSecs(r.measured.elapsed_seconds)} (the model's calibration)`;

/** The advice replayed: its time against the replay of the job as it ran. */
function placementPrediction(r: ModelResult): HTMLElement {
  const p = r.what_ifs.find((x) => x.scenario === "placement");
  if (!p) return h("p", { class: "panel-note" }, "No predicted time for the advice.");
  const flat = p.vs_as_ran_pct != null && Math.abs(p.vs_as_ran_pct) < 1;
  return h(
    "div",
    {},
    h(
      "p",
      { class: "panel-note placement-time" },
      `Predicted elapsed (the trace replayed on ${r.platform}): placed as advised ${modelSecs(p.elapsed_seconds)}, ${vsAsRan(p)} against the replay as it ran; ${calibration(r)}.`,
      flat ? " The replay expects no change of the elapsed time: the job's time is not in the traffic the advice moves." : "",
    ),
    r.warnings?.length ? h("p", { class: "warn-text" }, r.warnings.join(" · ")) : "",
  );
}

function modelView(r: ModelResult): HTMLElement {
  const secs = modelSecs;
  const perfect = r.what_ifs.find((p) => p.scenario === "perfect network");
  const headline = h(
    "p",
    { class: "panel-note model-headline" },
    `Measured ${secs(r.measured.elapsed_seconds)}; ${calibration(r)} on ${r.platform}`,
    perfect ? `; a perfect network would take ${secs(perfect.elapsed_seconds)} (${vsAsRan(perfect)} against the replay as it ran): the rest is compute and waiting for other ranks` : "",
    ".",
  );
  const preds = [r.as_ran, ...r.what_ifs];
  const scenarios = table<{ name: string; elapsed: number; mpi: number; bytes: number | null; vs?: number }>({
    label: "Predicted time",
    param: "ms",
    rows: [
      { name: "measured", elapsed: r.measured.elapsed_seconds, mpi: r.measured.mpi_seconds, bytes: null },
      ...preds.map((p) => ({ name: p.scenario, elapsed: p.elapsed_seconds, mpi: p.mpi_seconds, bytes: p.inter_node_p2p_bytes, vs: p.vs_as_ran_pct })),
    ],
    defaultSort: "elapsed",
    pageSize: 10,
    empty: "No predictions.",
    columns: [
      { key: "name", label: "Scenario", value: (x) => x.name },
      { key: "elapsed", label: "Elapsed", value: (x) => x.elapsed, cell: (x) => secs(x.elapsed), numeric: true },
      { key: "vs", label: "vs as ran", value: (x) => x.vs ?? 0, cell: (x) => (x.vs == null ? "–" : `${x.vs <= 0 ? "−" : "+"}${fmt.pct(Math.abs(x.vs))}`), numeric: true, title: "The change of the elapsed time against the replay of the job as it ran" },
      { key: "mpi", label: "MPI time (all ranks)", value: (x) => x.mpi, cell: (x) => secs(x.mpi), numeric: true },
      { key: "bytes", label: "Inter-node p2p", value: (x) => x.bytes ?? -1, cell: (x) => (x.bytes == null ? "–" : fmt.bytes(x.bytes)), numeric: true },
    ],
  });
  // Under names both sides share: the replay keeps messages, not the
  // point-to-point calls that posted and completed them.
  const names = [...new Set([...Object.keys(r.measured.function_groups), ...preds.flatMap((p) => Object.keys(p.function_groups))])];
  const functions = table<{ name: string; v: number[] }>({
    label: "Predicted MPI time per function (point-to-point: every point-to-point call together, as the replay keeps messages, not the calls that posted and completed them)",
    param: "mf",
    rows: names.map((n) => ({ name: n, v: [r.measured.function_groups[n] ?? 0, ...preds.map((p) => p.function_groups[n] ?? 0)] })),
    defaultSort: "c0",
    pageSize: 10,
    empty: "No MPI time.",
    columns: [
      { key: "name", label: "Function", value: (x) => x.name },
      ...["measured", ...preds.map((p) => p.scenario)].map((label, i) => ({ key: `c${i}`, label, value: (x: { v: number[] }) => x.v[i], cell: (x: { v: number[] }) => secs(x.v[i]), numeric: true })),
    ],
  });
  const warnings = r.warnings?.length ? h("p", { class: "warn-text" }, r.warnings.join(" · ")) : "";
  return h("div", {}, headline, warnings, scenarios, functions);
}

function placementView(r: Placement): HTMLElement {
  const g = r.gain["as_ran"];
  const headline = r.nothing_to_gain
    ? h("p", { class: "panel-note" }, `Nothing to gain: ${r.reason ?? "the job as it ran is as good as any placement found"}.`)
    : h(
        "p",
        { class: "panel-note" },
        g
          ? `Placing the ranks as advised would cut the job's bytes × hops by ${fmt.pct(g.byte_hops_pct)}, its inter-node bytes by ${fmt.pct(g.inter_node_bytes_pct)} and its heaviest link's load by ${fmt.pct(g.heaviest_link_pct)}.`
          : `The job as it ran cannot be judged${r.as_ran_unknown ? ` (${r.as_ran_unknown})` : ""}; the advice is compared with the usual placements below.`,
      );
  const rows: { name: string; c: PlacementCost | null }[] = [
    { name: "As it ran", c: r.as_ran },
    { name: "Advice", c: r.advice },
    { name: "Round-robin", c: r.round_robin },
    { name: "Block", c: r.block },
    { name: "Random", c: r.random },
  ];
  const costs = table<{ name: string; c: PlacementCost | null }>({
    label: "Placement costs",
    param: "pl",
    rows,
    defaultSort: "hops",
    defaultDir: "asc",
    empty: "No placements.",
    pageSize: 10,
    columns: [
      { key: "name", label: "Placement", value: (x) => x.name },
      { key: "inter", label: "Inter-node bytes", value: (x) => x.c?.inter_node_bytes ?? -1, cell: (x) => (x.c ? fmt.bytes(x.c.inter_node_bytes) : "–"), numeric: true },
      { key: "hops", label: "Bytes × hops", value: (x) => x.c?.byte_hops ?? -1, cell: (x) => (x.c ? fmt.count(x.c.byte_hops) : "–"), numeric: true, title: "Bytes weighted by the hops of their routes" },
      {
        key: "heavy",
        label: "Heaviest link",
        value: (x) => x.c?.heaviest_link?.bytes ?? -1,
        cell: (x) => (x.c?.heaviest_link ? heaviestLink(x.c.heaviest_link) : "–"),
        numeric: true,
      },
      { key: "nodes", label: "Nodes used", value: (x) => x.c?.nodes_used ?? -1, cell: (x) => (x.c ? String(x.c.nodes_used) : "–"), numeric: true },
    ],
  });
  const url = URL.createObjectURL(new Blob([r.file.content], { type: "text/plain" }));
  const download = h("a", { class: "btn", href: url, download: `${r.job}.${r.file.name}` }, `Download the ${r.file.name}`);
  const about = h(
    "p",
    { class: "panel-note" },
    `${r.ranks} ranks on ${r.nodes.length} node${r.nodes.length === 1 ? "" : "s"}, by ${r.method} in ${r.seconds.toFixed(2)} s`,
    r.peers_truncated ? h("span", { class: "warn-text" }, " · some ranks reported only their top peers: the traffic is a lower bound") : "",
  );
  return h("div", { class: "placement" }, headline, about, costs, r.nothing_to_gain ? "" : download);
}

// heaviestLink is the load, and which direction carries it when the
// answer says (an administrator's; a user's leaves the switches out).
function heaviestLink(l: PlacementLink): string {
  const where = l.from_description !== undefined && l.to_description !== undefined ? ` (${l.from_description} → ${l.to_description})` : "";
  return fmt.bytes(l.bytes) + where;
}

function rankList(ranks: number[]): string {
  if (!ranks.length) return "–";
  const s = [...ranks].sort((a, b) => a - b);
  if (s[s.length - 1]! - s[0]! === s.length - 1) return s.length === 1 ? String(s[0]) : `${s[0]}–${s[s.length - 1]} (${s.length})`;
  return s.length <= 4 ? s.join(", ") : `${s.slice(0, 3).join(", ")} … (${s.length})`;
}

/** Aligns job series (one per node or rank) on the union of their times. */
function alignJob(list: JobSeries[]): { time: number[]; col: (k: number, key: string) => (number | null)[] } {
  const set = new Set<number>();
  for (const s of list) for (const x of s.series.time) set.add(Math.round(x * 1000) / 1000);
  const time = [...set].sort((a, b) => a - b);
  const pos = new Map(time.map((x, i) => [x, i]));
  return {
    time,
    col: (k, key) => {
      const out: (number | null)[] = time.map(() => null);
      const s = list[k]!.series;
      const vals = s.values[key] ?? [];
      s.time.forEach((x, i) => (out[pos.get(Math.round(x * 1000) / 1000)!] = vals[i] ?? null));
      return out;
    },
  };
}
