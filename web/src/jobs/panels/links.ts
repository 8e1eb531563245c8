// The links the job's traffic crosses (GET /jobs/{job}/why): its heaviest
// link directions, how loaded they are, how much of what the counters
// measured the monitored jobs explain, and which other jobs share them.
import { ApiError, get } from "../../api";
import { h, link, loading, panel } from "../../dom";
import * as fmt from "../../format";
import { dirLabel } from "../../ports";
import { table } from "../../table";
import type { JobOnLink, Why, WhyLink } from "../api";
import { jobPath } from "../api";
import { checkNote, explainedText, flagged, jobLabel } from "../linkjobs";
import { listedText } from "../../listed";
import { splitText } from "../../routemodel";
import { message } from "./context";
import type { JobContext, JobPanel } from "./context";

const trafficModelHelp: Record<string, string> = {
  physical: "Open MPI's monitoring told the agent the messages the library really sent, collectives decomposed into its trees and rings: these bytes crossed the links (netloom run --physical; the monitoring costs messages of 0 to 64 bytes 21 to 36% of their rate).",
  logical: "The application's MPI calls, a collective counted as its root sending to every rank: the library may have moved other bytes over other links. Under Open MPI, netloom run --physical turns its monitoring on for the physical traffic, at a cost of 21 to 36% of the rate of messages of 0 to 64 bytes (the agent alone: 3.5 to 6%).",
};

/** A job before or after this one on a direction: its bytes there and
 * their share, when it ran, and how much of the range it ran in. */
function neighbourText(o: JobOnLink, monitored: number): (string | HTMLElement)[] {
  const share = monitored > 0 ? ` (${fmt.pct((100 * o.bytes) / monitored)})` : "";
  const at = (t: string) => h("time", { datetime: t }, fmt.time(t));
  const when = o.start ? [", ran ", at(o.start), " – ", o.end ? at(o.end) : "running"] : [];
  const inRange = o.in_range_seconds ? `, ${o.in_range_seconds} s of it in the range` : "";
  return [` ${o.ran ?? "not at the same time"}: ${fmt.bytes(o.bytes)}${share}`, ...when, inRange];
}

export function linksPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { id, t, tq, signal } = ctx;
  const linksBox = h("div", {}, loading("Loading links…"));

  // A finished job's links open over exactly the range of its links
  // table (its life, in whole seconds, from the why answer), so that the
  // link page's figures for the direction are the table's; a running
  // job's open live (the link page says its range).
  const linkWindow = (r: Why): string => {
    const j = ctx.detail()?.job;
    if (t.mode !== "live" || !j || j.state === "running" || !j.end) return tq;
    const from = Date.parse(r.from) / 1000;
    const to = Date.parse(r.to) / 1000;
    return Number.isFinite(from) && Number.isFinite(to) && from < to ? `?from=${from}&to=${to}` : tq;
  };

  const load = async () => {
    try {
      const r = await get<Why>(jobPath(id, "/why"), { limit: 20 }, signal);
      const a = r.attribution;
      const n = r.sharing_jobs?.length ?? 0;
      const note = a
        ? h(
            "p",
            { class: "panel-note links-note" },
            `${fmt.bytes(a.bytes)} of inter-node traffic routed over links in ${fmt.plural(a.intervals, "interval")}`,
            r.traffic_model ? h("span", { class: "traffic-model", title: trafficModelHelp[r.traffic_model] ?? "" }, ` · ${r.traffic_model === "physical" ? "as the MPI library sent it" : "as the application called MPI"} (${r.traffic_model})`) : "",
            a.unmapped_nodes.length ? h("span", { class: "warn-text" }, ` · nodes not found in the fabric: ${a.unmapped_nodes.join(", ")} (${fmt.bytes(a.unmapped_bytes)} left out)`) : "",
            // Only jobs that ran at the same time share a link: the jobs
            // just before and after it are not counted.
            n ? h("span", { class: "sharing" }, ` · shares links with ${n} other job${n === 1 ? "" : "s"} that ran at the same time`) : "",
          )
        : null;
      const range = h("p", { class: "panel-note links-range", "data-from": r.from, "data-to": r.to }, `Loads and explained shares over ${fmt.time(r.from)} – ${fmt.time(r.to)}, the job's life (its links open over the same range).`);
      const box = h("div", {});
      if (note) box.append(note);
      box.append(range);
      // A list cut says so, with its total.
      box.append(h("p", { class: "panel-note links-count", "data-total": String(r.total), "data-shown": String(r.links.length) }, listedText(r.links.length, r.total, "link direction", "the job's traffic crosses")));
      // Where the fabric's counters carry none of the jobs' traffic, one
      // note says so for every direction (the daemon's sentence).
      const flat = r.links.find((x) => x.check?.status === "not_carried");
      if (flat?.check.message) box.append(h("p", { class: "panel-note not-carried", "data-check": "not_carried" }, flat.check.message));
      const win = linkWindow(r);
      box.append(
        table<WhyLink>({
          label: "Links crossed by the job",
          param: "l",
          rows: r.links,
          defaultSort: "bytes",
          pageSize: 20,
          rowClass: (x) => (flagged(x) ? "bad" : ""),
          empty: "No attributed link traffic: the job sent nothing between nodes yet, or its nodes are not in this fabric.",
          columns: [
            { key: "dir", label: "Link direction", value: (x) => `${x.from_description} → ${x.to_description}`, cell: (x) => link(`/links/${x.link.id}?job=${encodeURIComponent(id)}&${win.slice(1)}`.replace(/&$/, ""), dirLabel(x)) },
            { key: "bytes", label: "Job bytes", value: (x) => x.job_bytes, cell: (x) => fmt.bytes(x.job_bytes), numeric: true },
            { key: "share", label: "Job share", value: (x) => x.job_share_pct, cell: (x) => fmt.pct(x.job_share_pct), numeric: true, title: "Of the traffic monitored jobs put on this direction over the range; the rest is the other jobs' named beside it" },
            { key: "util", label: "Measured load", value: (x) => x.measured_utilization_pct, cell: (x) => (x.measured.measured ? fmt.pct(x.measured_utilization_pct) : "–"), numeric: true, title: "What the counters measured, as a share of capacity over the range above" },
            { key: "jobsutil", label: "Jobs' load", value: (x) => x.monitored_utilization_pct, cell: (x) => fmt.pct(x.monitored_utilization_pct), numeric: true, title: "What the monitored jobs put on it, as a share of capacity over the range above" },
            { key: "expl", label: "Explained", value: (x) => x.explained_pct ?? -1, cell: (x) => h("span", { class: flagged(x) ? "warn-text" : "", title: x.check?.message ?? "" }, explainedText(x)), numeric: true, title: "Monitored jobs' bytes ÷ measured bytes, as measured (over 100%: the note below says why); ⚠ when they disagree" },
            {
              key: "others",
              label: "Other jobs at the same time",
              value: (x) => x.others.length,
              cell: (x) => (x.others.length ? h("span", {}, ...x.others.slice(0, 4).flatMap((o, k) => [k ? ", " : "", jobLabel(o, tq)]), x.others.length > 4 ? ` +${x.others.length - 4}` : "") : "none"),
            },
            {
              // The jobs just before and after it whose last (or first)
              // bytes lie in the range: their share of the direction is
              // theirs, said with when they ran.
              key: "neighbours",
              label: "Jobs before or after it in the range",
              value: (x) => x.not_overlapping_bytes ?? 0,
              cell: (x) => (x.not_overlapping?.length ? h("span", { class: "neighbours" }, ...x.not_overlapping.flatMap((o, k) => [k ? "; " : "", jobLabel(o, tq), ...neighbourText(o, x.monitored_bytes)])) : "none"),
            },
            // On an Ethernet fabric, how the direction's bytes were split
            // over equal-cost paths (sFlow's observed split or the even one).
            ...(r.route_model ? [{ key: "model", label: "Route model", value: (x: WhyLink) => splitText(x, r.route_model), cell: (x: WhyLink) => h("span", { class: "route-model" }, splitText(x, r.route_model)) }] : []),
          ],
        }),
      );
      // The consistency check under each explained figure: where the jobs'
      // bytes and the counters disagree, say so with the likely cause.
      const checks = r.links.filter((x) => x.check?.status !== "not_carried").map((x) => checkNote(x, `${dirLabel(x)}: `)).filter((x): x is HTMLElement => x !== null);
      if (checks.length) box.append(h("div", { class: "explained-checks pad" }, ...checks));
      linksBox.replaceChildren(box);
    } catch (err) {
      if (signal.aborted) return;
      const missing = err instanceof ApiError && (err.status === 404 || err.status === 405);
      linksBox.replaceChildren(h("div", { class: "state empty" }, missing ? "Link attribution is not available from this daemon." : `Links unavailable: ${message(err)}`));
    }
  };
  return { el: panel("Links the job's traffic crosses", linksBox), load };
}
