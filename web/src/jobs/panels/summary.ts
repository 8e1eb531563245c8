// The job's summary card: ranks, nodes, duration, CPU, MPI, memory and its
// bytes by locality and class.
import { h, loading, metric } from "../../dom";
import * as fmt from "../../format";
import { duration } from "../state";
import type { JobDetail } from "../api";
import type { JobPanel } from "./context";

export function summaryPanel(): JobPanel & { el: HTMLElement } {
  const el = h("div", { class: "cards one" }, h("div", { class: "card" }, loading()));
  return {
    el,
    show(d: JobDetail) {
      const j = d.job;
      el.replaceChildren(
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
    },
  };
}
