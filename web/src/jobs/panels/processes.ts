// The job's processes: one row per rank, where it runs, its CPU, MPI time,
// memory and bytes, and whether it has finalized.
import { h } from "../../dom";
import * as fmt from "../../format";
import type { ProcessView } from "../api";
import { bytesColumns, detailTable } from "./context";
import type { JobPanel } from "./context";

export function processesPanel(): JobPanel & { el: HTMLElement } {
  return detailTable<ProcessView>("Processes", "Loading processes…", (d) => ({
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
      ...bytesColumns<ProcessView>(),
      { key: "state", label: "State", value: (p) => (p.final ? "finalized" : "running"), cell: (p) => h("span", { class: `badge ${p.final ? "" : "run"}` }, p.final ? "finalized" : "running") },
    ],
  }));
}
