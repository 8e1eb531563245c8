// The communication matrix: rank to rank and node to node, for one traffic
// class and metric chosen in the panel's tools (kept in the address).
import { get } from "../../api";
import { h, panel } from "../../dom";
import type { MatrixResponse } from "../api";
import { jobPath } from "../api";
import { heatmap } from "../heatmap";
import { CLASSES, message, METRICS } from "./context";
import type { JobContext, JobPanel } from "./context";

export function matrixPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { id, signal, view } = ctx;
  const rankHeat = heatmap("Rank to rank");
  const nodeHeat = heatmap("Node to node");
  const load = async () => {
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
          hm.fail(message(err));
        }
      }),
    );
  };
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
            ctx.saveView();
            void load();
          },
        },
        l,
      ),
    );
    return h("div", { class: "segmented light", role: "group", "aria-label": label }, ...buttons);
  };
  const tools = h(
    "div",
    { class: "panel-tools" },
    seg(CLASSES, () => view.mclass, (v) => (view.mclass = v), "Traffic class"),
    seg(METRICS, () => view.mmetric, (v) => (view.mmetric = v), "Metric"),
  );
  return {
    el: panel("Communication matrix", h("div", { class: "heatmaps" }, rankHeat.el, nodeHeat.el), tools),
    load,
  };
}
