// The job page: summary, per-node and per-process tables and time series,
// rank- and node-level communication matrices per class, message sizes,
// time per MPI function per rank, where the ranks wait before collectives
// (with `netloom run --waits`) and which ranks the others wait for, regions, the links the job crosses (once
// the daemon attributes link traffic to jobs) and a link to its nodes on
// the network map. Refreshed live while the job runs. A regular user (their
// own jobs only) gets no map and no node pages: those are the fabric's; the
// links list stays, with other users' jobs shown as "other job".
//
// Each panel is a module of jobs/panels/; this page lays them out, loads
// the job's detail for those that show it, and has each panel load its own
// figures, live while the job runs.
import { get } from "../api";
import { h } from "../dom";
import type { JobDetail } from "../jobs/api";
import { jobPath } from "../jobs/api";
import { jobContext } from "../jobs/panels/context";
import type { JobPanel } from "../jobs/panels/context";
import { collisionsPanel } from "../jobs/panels/collisions";
import { functionsPanel } from "../jobs/panels/functions";
import { gpuPanels } from "../jobs/panels/gpu";
import { headPanel } from "../jobs/panels/head";
import { histogramPanel } from "../jobs/panels/histogram";
import { linksPanel } from "../jobs/panels/links";
import { matrixPanel } from "../jobs/panels/matrix";
import { modelPanel } from "../jobs/panels/model";
import { nodesPanel } from "../jobs/panels/nodes";
import { placementPanel } from "../jobs/panels/placement";
import { processesPanel } from "../jobs/panels/processes";
import { regionsPanel } from "../jobs/panels/regions";
import { reorderPanel } from "../jobs/panels/reorder";
import { seriesPanel } from "../jobs/panels/series";
import { summaryPanel } from "../jobs/panels/summary";
import { waitsPanel } from "../jobs/panels/waits";
import type { PageContext } from "../router";

/** Live refresh period while the job runs. */
const JOB_REFRESH_MS = 3000;

export async function jobPage(page: PageContext): Promise<void> {
  const { root, signal } = page;
  const id = page.params.job!;
  let detail: JobDetail | null = null;
  const ctx = jobContext(id, page.search, signal, () => detail);

  // Skeleton: every section has its final place and a loading state.
  const head = headPanel(ctx);
  const summary = summaryPanel();
  const nodes = nodesPanel(ctx);
  const processes = processesPanel();
  const reorder = reorderPanel();
  const series = seriesPanel(ctx);
  const matrix = matrixPanel(ctx);
  const histogram = histogramPanel(ctx);
  const regions = regionsPanel(ctx);
  const waits = waitsPanel();
  const functions = functionsPanel(ctx, waits);
  const gpu = gpuPanels(ctx);
  const links = linksPanel(ctx);
  const collisions = collisionsPanel(ctx);
  const placement = placementPanel(ctx);
  const model = modelPanel(ctx);
  root.append(
    head.el,
    summary.el,
    nodes.el,
    series.nodes,
    processes.el,
    reorder.el,
    series.ranks,
    matrix.el,
    h("div", { class: "grid2" }, histogram.el, regions.el),
    functions.el,
    gpu.buffers,
    gpu.nccl,
    waits.el,
    links.el,
    collisions.el,
    placement.el,
    model.el,
  );

  // What the job's detail shows, and what each refresh reloads (placement
  // advice and the model's replay: once).
  const showing: JobPanel[] = [reorder, head, summary, nodes, processes, histogram];
  const live: JobPanel[] = [series, matrix, histogram, regions, functions, gpu, links, collisions];
  const loadDetail = async () => {
    const d = await get<JobDetail>(jobPath(id), {}, signal);
    detail = d;
    for (const p of showing) p.show!(d);
    root.dataset.state = d.job.state;
    return d;
  };
  const loadAll = async () => {
    await loadDetail();
    await Promise.all(live.map((p) => p.load!()));
  };
  await loadDetail();
  await Promise.all([...live, placement, model].map((p) => p.load!()));
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
