// A job on the map (?job=ID): its hosts and the link directions its
// traffic crosses drawn in the job's colour, and the bar above the map
// that says what was found; refreshed while live since a running job may
// grow.
import type Sigma from "sigma";
import { get } from "../../api";
import { append, h, link } from "../../dom";
import { refreshOnSweep } from "../../live";
import type { JobOnLink, NodeView } from "../../jobs/api";
import { jobPath } from "../../jobs/api";
import { JOB_COLOR } from "../../map/colors";
import { navigate } from "../../router";
import { timeQuery } from "../../time";
import type { TimeView } from "../../time";
import type { MapGraph } from "./graph";
import type { JobDirection, MapState } from "./state";

export function showJobOnMap(jobId: string, g: MapGraph, st: MapState, renderer: Sigma, jobBar: HTMLElement, container: HTMLElement, t: TimeView, signal: AbortSignal): void {
  const { layout, n, m, collapsible } = g;
  // The job's hosts: its node names matched to host names ("n7" is host
  // "n7 HCA-1").
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
  for (let j = 0; j < m; j++) byLink.set(g.linkId(j), j);
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
      const list: JobDirection[] = [];
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
        const grp = host >= 0 ? layout.group[host]! : -1;
        if (collapsible && grp >= 0) groups.set(grp, (groups.get(grp) ?? 0) | ((dir === 0) === (host === a) ? 1 : 2));
      }
      list.sort((x, y) => x.j - y.j || x.dir - y.dir);
      st.highlighted = hit;
      st.highlightedGroups = new Set([...hit].map((i) => layout.group[i]!).filter((grp) => grp >= 0));
      st.jobDirs = dirs;
      st.jobGroupDirs = groups;
      st.jobDirList = list;
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
