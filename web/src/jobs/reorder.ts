// The job page's "Rank reordering" panel: when and how the job reordered its
// own ranks with netloom_reorder (docs/reorder.md), from the ranks' records
// in the job's processes (GET /jobs/{job}). Hidden for a job that never did.
import { h } from "../dom";
import * as fmt from "../format";
import type { ProcessView, RankReorder } from "./api";

/** One reordering as the job saw it: the ranks' records of the same call. */
export interface JobReorder extends RankReorder {
  reported: number;
  moves: { rank: number; old_rank: number; new_rank: number }[];
}

/** Joins the ranks' records by call (index, size, prediction), oldest first. */
export function joinReorders(procs: ProcessView[]): JobReorder[] {
  const out: JobReorder[] = [];
  for (const p of procs) {
    for (const r of p.reorders ?? []) {
      let o = out.find((x) => x.index === r.index && x.ranks === r.ranks && x.inter_node_before === r.inter_node_before);
      if (!o) {
        o = { ...r, reported: 0, moves: [] };
        out.push(o);
      }
      o.reported++;
      if (r.time > o.time) o.time = r.time;
      o.seconds = Math.max(o.seconds, r.seconds);
      o.map_seconds = Math.max(o.map_seconds, r.map_seconds);
      o.moves.push({ rank: p.rank, old_rank: r.old_rank, new_rank: r.new_rank });
    }
  }
  return out.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
}

/** The panel's body. */
export function reorderView(rs: JobReorder[]): HTMLElement {
  return h(
    "div",
    { class: "reorders" },
    ...rs.map((r) => {
      const cut = r.inter_node_before > 0 ? 100 * (1 - r.inter_node_after / r.inter_node_before) : 0;
      const how =
        r.method === "scotch"
          ? `Scotch's order: ${r.moved} of ${fmt.plural(r.ranks, "rank")} moved`
          : "order kept: nothing to gain";
      const moves = [...r.moves].sort((a, b) => a.rank - b.rank);
      return h(
        "div",
        { class: "reorder", "data-method": r.method },
        h(
          "p",
          {},
          h("strong", {}, fmt.time(r.time)),
          ` · ${r.comm_world ? "MPI_COMM_WORLD" : "a communicator"} of ${fmt.plural(r.ranks, "rank")} on ${fmt.plural(r.nodes, "node")} · ${how}`,
        ),
        h(
          "p",
          {},
          `Predicted inter-node bytes ${fmt.bytes(r.inter_node_before)} → ${fmt.bytes(r.inter_node_after)} (${cut.toFixed(1)}% less) of ${fmt.bytes(r.total_bytes)}, `,
          `from the matrix since ${r.since ? `mark "${r.since}"` : "MPI_Init"}; the call took ${r.seconds.toFixed(3)} s (mapping ${r.map_seconds.toFixed(3)} s); `,
          `${r.reported} of ${fmt.plural(r.ranks, "rank")} reported it.`,
        ),
        r.method === "scotch"
          ? h("p", { class: "reorder-moves" }, "World rank: old → new rank: ", moves.map((m) => `${m.rank}: ${m.old_rank}→${m.new_rank}`).join(", "))
          : "",
      );
    }),
  );
}
