// Rank reordering: shown only for a job whose ranks reordered themselves
// (netloom_reorder, docs/reorder.md).
import { h, panel } from "../../dom";
import type { JobDetail } from "../api";
import { joinReorders, reorderView } from "../reorder";
import type { JobPanel } from "./context";

export function reorderPanel(): JobPanel & { el: HTMLElement } {
  const box = h("div", {}, "");
  const el = panel("Rank reordering (netloom_reorder)", box);
  el.classList.add("reorder-panel");
  el.hidden = true;
  return {
    el,
    show(d: JobDetail) {
      const reorders = joinReorders(d.processes);
      el.hidden = reorders.length === 0;
      if (reorders.length > 0) box.replaceChildren(reorderView(reorders));
    },
  };
}
