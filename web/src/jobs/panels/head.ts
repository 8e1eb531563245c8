// The job page's head: the crumbs, the job's title, the link to its nodes
// on the network map (administrators) and the line under the title (state,
// program, user, library, when it started and ended).
import { h, link } from "../../dom";
import * as fmt from "../../format";
import { stateBadge } from "../state";
import type { JobDetail } from "../api";
import type { JobContext, JobPanel } from "./context";

export function headPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { id, tq } = ctx;
  const title = h("h1", {}, `Job ${id}`);
  const sub = h("p", { class: "sub" }, "\u00a0");
  const mapLink = ctx.admin ? link(`/network?job=${encodeURIComponent(id)}${tq ? "&" + tq.slice(1) : ""}`, "Show its nodes on the network map") : null;
  mapLink?.classList.add("btn");
  const el = h(
    "div",
    { class: "page-head" },
    h("nav", { class: "crumbs" }, link(`/jobs${tq}`, "Jobs"), " / job"),
    h("div", { class: "head-row" }, title, mapLink),
    sub,
  );
  return {
    el,
    show(d: JobDetail) {
      const j = d.job;
      title.textContent = `Job ${j.id}`;
      sub.replaceChildren(
        stateBadge(j),
        ` ${j.program || "unknown program"}`,
        j.user ? ` · user ${j.user}` : "",
        j.mpi_library ? ` · ${j.mpi_library}` : "",
        ` · started ${fmt.time(j.start)}`,
        j.end ? ` · ended ${fmt.time(j.end)}` : ` · last report ${fmt.ago(j.updated)}`,
      );
    },
  };
}
