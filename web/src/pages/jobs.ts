// The jobs page: MPI jobs in a table sorted and paged by the server (every
// metric of GET /api/v1/jobs is a sort key), running ones by default with a
// switch to finished or all; refreshed live every few seconds. In the past
// (the header's time control) it lists the jobs that ran in that range or
// at that time (from/to of GET /jobs). A user sees their own jobs only: the
// daemon filters them.
import { get, isAdmin } from "../api";
import { h, link, panel } from "../dom";
import * as fmt from "../format";
import type { JobList, JobSummary } from "../jobs/api";
import { duration, stateBadge } from "../jobs/state";
import type { PageContext } from "../router";
import { navigate } from "../router";
import { serverTable } from "../servertable";
import type { ServerColumn } from "../servertable";
import { describe, readTime, timeQuery } from "../time";
import type { TimeView } from "../time";

/** Live refresh period of the list. */
export const JOBS_REFRESH_MS = 2000;

type State = "running" | "finished" | "all";
const STATES: [State, string][] = [
  ["running", "Running"],
  ["finished", "Finished"],
  ["all", "All"],
];

/** The jobs API's time filter for a view: jobs that ran at some time in
 * [from, to]; at a past time, the jobs running then. Live: none. */
export function jobsRange(t: TimeView): { from?: string; to?: string } {
  if (t.mode === "range") return { from: String(t.from), to: String(t.to) };
  if (t.mode === "at") return { from: String(t.at), to: String(t.at) };
  return {};
}

export async function jobsPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal, search } = ctx;
  const state: State = (STATES.find(([s]) => s === search.get("state"))?.[0] ?? (t.mode === "live" ? "running" : "all")) as State;
  const tq = timeQuery(t);

  const stateButtons = STATES.map(([s, label]) =>
    h(
      "button",
      {
        type: "button",
        class: "seg",
        "data-state": s,
        "aria-pressed": String(s === state),
        onclick: () => {
          const q = new URLSearchParams(location.search);
          q.set("state", s);
          q.delete("page");
          navigate(`/jobs?${q.toString()}`, true);
        },
      },
      label,
    ),
  );
  const note = h("span", { class: "hint", role: "status" }, "\u00a0");
  const columns: ServerColumn<JobSummary>[] = [
    { key: "id", sort: "id", label: "Job", cell: (j) => link(`/jobs/${encodeURIComponent(j.id)}${tq}`, j.id) },
    { key: "state", label: "State", cell: stateBadge },
    { key: "program", label: "Program", cell: (j) => h("span", { class: "prog" }, j.program || "–", j.user ? h("span", { class: "dim-text" }, ` · ${j.user}`) : null) },
    { key: "ranks", sort: "ranks", label: "Ranks", numeric: true, cell: (j) => fmt.count(j.ranks) },
    { key: "nodes", sort: "nodes", label: "Nodes", numeric: true, cell: (j) => fmt.count(j.nodes) },
    { key: "start", sort: "start", label: "Start", cell: (j) => h("time", { datetime: j.start, title: fmt.time(j.start) }, fmt.time(j.start)) },
    { key: "duration", sort: "duration", label: "Duration", numeric: true, cell: (j) => duration(j.duration_seconds) },
    { key: "cpu", sort: "cpu", label: "CPU", numeric: true, title: "Mean over ranks of CPU time / wall time", cell: (j) => fmt.pct(j.cpu_percent) },
    { key: "mpi", sort: "mpi", label: "MPI", numeric: true, title: "Mean over ranks of time in MPI / wall time", cell: (j) => fmt.pct(j.mpi_percent) },
    { key: "memory", sort: "memory", label: "Memory", numeric: true, title: "Resident memory, all ranks", cell: (j) => fmt.bytes(j.memory_bytes) },
    { key: "bytes", sort: "bytes", label: "Sent", numeric: true, title: "Bytes sent by all ranks, all classes", cell: (j) => fmt.bytes(j.total.bytes) },
    { key: "inter_node_bytes", sort: "inter_node_bytes", label: "Inter-node", numeric: true, cell: (j) => fmt.bytes(j.inter_node.bytes) },
    { key: "intra_node_bytes", sort: "intra_node_bytes", label: "Intra-node", numeric: true, cell: (j) => fmt.bytes(j.intra_node.bytes) },
    { key: "p2p_bytes", sort: "p2p_bytes", label: "P2P", numeric: true, title: "Point-to-point bytes", cell: (j) => fmt.bytes(j.traffic.p2p.bytes) },
    { key: "coll_bytes", sort: "coll_bytes", label: "Coll", numeric: true, title: "Collective bytes", cell: (j) => fmt.bytes(j.traffic.coll.bytes) },
    { key: "rma_bytes", sort: "rma_bytes", label: "RMA", numeric: true, title: "One-sided (RMA) bytes", cell: (j) => fmt.bytes(j.traffic.rma.bytes) },
  ];
  const tbl = serverTable<JobSummary>({
    label: "MPI jobs",
    columns,
    defaultSort: "start",
    defaultDir: "desc",
    pageSize: 25,
    empty:
      t.mode !== "live"
        ? `No ${state === "all" ? "" : state + " "}job ran ${t.mode === "range" ? "in this time range" : "at this time"}.`
        : state === "running"
          ? "No job is running. Jobs appear here when their ranks start under the Netloom agent (netloom run)."
          : "No jobs.",
    rowKey: (j) => j.id,
    signal,
    fetch: async (q, sig) => {
      const r = await get<JobList>("/jobs", { state, sort: q.sort, order: q.dir, offset: q.offset, limit: q.limit, ...jobsRange(t) }, sig);
      return { rows: r.jobs, total: r.total };
    },
  });

  root.append(
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, isAdmin() ? "MPI jobs" : "Your MPI jobs"),
      h("p", { class: "sub" }, `${isAdmin() ? "Jobs" : "Your jobs"} reported by the Netloom agent${t.mode === "live" ? "" : t.mode === "range" ? ", those that ran " + describe(t) : ", those running " + describe(t)}. Sort by any column; counters are cumulative since MPI_Init.`),
    ),
    panel(
      "Jobs",
      tbl.el,
      h("div", { class: "panel-tools" }, note, h("div", { class: "segmented light", role: "group", "aria-label": "Job state" }, ...stateButtons)),
    ),
  );

  const refresh = async () => {
    try {
      await tbl.reload();
      note.textContent = t.mode === "live" ? `live · refreshed ${fmt.time(Date.now() / 1000)}` : `${state === "all" ? "" : state + " "}jobs that ran ${t.mode === "range" ? describe(t) : "at the time shown"}`;
    } catch (err) {
      if (signal.aborted) return;
      note.textContent = `refresh failed: ${err instanceof Error ? err.message : String(err)}`;
    }
  };
  await tbl.reload();
  void refresh();
  if (t.mode === "live") {
    const timer = setInterval(() => void refresh(), JOBS_REFRESH_MS);
    signal.addEventListener("abort", () => clearInterval(timer));
  }
}
