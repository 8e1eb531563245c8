// The job's nodes: ranks, CPU, MPI time, memory and bytes per node, each
// node linked to its page for an administrator.
import { link } from "../../dom";
import * as fmt from "../../format";
import type { NodeView } from "../api";
import { seconds } from "../profile";
import { bytesColumns, detailTable } from "./context";
import type { JobContext, JobPanel } from "./context";

export function nodesPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { admin, tq } = ctx;
  return detailTable<NodeView>("Nodes", "Loading nodes…", (d) => ({
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
      ...bytesColumns<NodeView>(),
    ],
  }));
}

/** "0–3" or "0, 2, 5" or "0, 2, 5 … (40)". */
function rankList(ranks: number[]): string {
  if (!ranks.length) return "–";
  const s = [...ranks].sort((a, b) => a - b);
  if (s[s.length - 1]! - s[0]! === s.length - 1) return s.length === 1 ? String(s[0]) : `${s[0]}–${s[s.length - 1]} (${s.length})`;
  return s.length <= 4 ? s.join(", ") : `${s.slice(0, 3).join(", ")} … (${s.length})`;
}
