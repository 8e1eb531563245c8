// Point-to-point message sizes: the job's, or one rank's chosen in the
// panel's tools (kept in the address).
import { get } from "../../api";
import { h, loading, panel } from "../../dom";
import type { Histogram, JobDetail } from "../api";
import { jobPath } from "../api";
import { histogramBars } from "../histogram";
import { message } from "./context";
import type { JobContext, JobPanel } from "./context";

export function histogramPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { id, signal, view } = ctx;
  const rank = h("select", { class: "small-select", "aria-label": "Message sizes of" }, h("option", { value: "" }, "All ranks"));
  const box = h("div", { class: "histo-box" }, loading());
  const load = async () => {
    try {
      const r = await get<{ histogram: Histogram }>(jobPath(id, "/histogram"), { rank: view.hrank }, signal);
      const hg = r.histogram;
      const counts = view.hrank === "" ? hg.job : (hg.per_rank[hg.ranks.indexOf(Number(view.hrank))] ?? []);
      box.replaceChildren(histogramBars(counts, hg.bin_min_bytes, view.hrank === "" ? "No point-to-point messages yet." : `Rank ${view.hrank} sent no point-to-point messages.`));
    } catch (err) {
      if (signal.aborted) return;
      box.replaceChildren(h("div", { class: "state error" }, message(err)));
    }
  };
  rank.addEventListener("change", () => {
    view.hrank = rank.value;
    ctx.saveView();
    void load();
  });
  return {
    el: panel("Point-to-point message sizes", box, rank),
    // The rank choices follow the ranks that reported.
    show(d: JobDetail) {
      if (rank.options.length !== d.processes.length + 1) {
        rank.replaceChildren(h("option", { value: "" }, "All ranks"), ...d.processes.map((p) => h("option", { value: String(p.rank) }, `Rank ${p.rank}`)));
        rank.value = view.hrank;
      }
    },
    load,
  };
}
