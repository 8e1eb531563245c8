// The job's time series: bytes sent and CPU per node, bytes sent, time in
// MPI and (a job run with --waits) waiting per rank, for the nodes and
// ranks that sent most.
import { get } from "../../api";
import { chartError, chartFrame, drawChart, PALETTE } from "../../chart";
import { h } from "../../dom";
import * as fmt from "../../format";
import type { JobSeries } from "../api";
import { jobPath } from "../api";
import type { JobContext, JobPanel } from "./context";

/** Time series are drawn for at most this many nodes or ranks. */
const MAX_LINES = 16;

export function seriesPanel(ctx: JobContext): JobPanel & { nodes: HTMLElement; ranks: HTMLElement } {
  const { id, t, signal } = ctx;
  const charts = {
    nodeBytes: chartFrame("Sent per node (bytes/s)"),
    nodeCpu: chartFrame("CPU per node (% of one core)"),
    rankBytes: chartFrame("Sent per rank (bytes/s)"),
    rankMpi: chartFrame("Time in MPI per rank (% of wall time)"),
    // Only for a job run with --waits: the waits per interval.
    rankWait: chartFrame("Waiting per rank (% of wall time: before collectives and for late senders)"),
  };
  charts.rankWait.hidden = true;
  const seriesRange = (): Record<string, string> => (t.mode === "range" ? { from: String(t.from), to: String(t.to) } : {});

  const load = async () => {
    const d = ctx.detail()!;
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

  return {
    nodes: h("div", { class: "grid2" }, charts.nodeBytes, charts.nodeCpu),
    ranks: h("div", { class: "grid2" }, charts.rankBytes, charts.rankMpi, charts.rankWait),
    load,
  };
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
