// The link page's "traffic by job" section: per direction, what the
// counters measured, how much of it monitored jobs explain, and those jobs
// ranked by bytes; for the job chosen with ?job=, the rank pairs that
// cross the link (GET /links/{link}/jobs and /links/{link}/jobs/{job}/pairs).
import { get } from "../api";
import { h, link, loading } from "../dom";
import * as fmt from "../format";
import { dirLabel } from "../ports";
import { splitText } from "../routemodel";
import { setQuery } from "../router";
import { table } from "../table";
import type { TimeView } from "../time";
import { rangeParams, timeQuery } from "../time";
import type { DirectionLoad, JobOnLink, LinkJobs, LinkPairs } from "./api";

/** An explained figure as measured, over 100% too (never capped). */
export function explainedPct(v: number): string {
  return v >= 1000 ? `${Math.round(v).toLocaleString("en-US")}%` : fmt.pct(v);
}

/** What a page shows where the counters carry none of the jobs' traffic
 * (a simulated fabric: the check's not_carried) instead of a figure. */
export const NOT_CARRIED = "not measurable: counters carry no job traffic";

/** The explained figure of a direction as measured, over 100% too (the
 * check's note below says why), marked when its consistency check found
 * the jobs' bytes and the counters disagree; where the fabric's counters
 * carry none of the jobs' traffic, said so instead. */
export function explainedText(d: DirectionLoad): string {
  if (d.check?.status === "not_carried") return NOT_CARRIED;
  const v = d.explained_pct == null ? "–" : explainedPct(d.explained_pct);
  return flagged(d) ? `${v} ⚠` : v;
}

/** Whether the check under a direction's explained figure is a warning. */
export function flagged(d: DirectionLoad): boolean {
  return d.check?.status === "inconsistent" || d.check?.status === "not_measured";
}

/** The check's sentence under the figure, as the daemon wrote it: a
 * warning naming the likely cause, or a note on timing; null when the
 * jobs' bytes fit in what the counters measured. */
export function checkNote(d: DirectionLoad, label = ""): HTMLElement | null {
  const c = d.check;
  if (!c?.message) return null;
  return h(
    "p",
    { class: `explained-check ${flagged(d) ? "warn-text" : "dim-text"}`, "data-check": c.status, "data-cause": c.cause ?? "", "data-from": `${d.from.guid}:${d.from.port}` },
    flagged(d) ? "⚠ " : "",
    label,
    c.message,
  );
}

/** How a job on a link is named: a link to its page, or "other job" for
 * another user's job, which a regular user may not open (the daemon gives
 * it an id like "other-1" that names no real job). */
export function jobLabel(j: { job: string; anonymized?: boolean }, tq: string): Node {
  if (j.anonymized) return h("span", { class: "anon-job", title: "Another user's job", "data-anonymized": "" }, "other job");
  return link(`/jobs/${encodeURIComponent(j.job)}${tq}`, j.job);
}

export function linkJobs(linkId: string, t: TimeView, signal: AbortSignal): { el: HTMLElement; load: () => Promise<void> } {
  const el = h("div", { class: "link-jobs" }, loading("Loading jobs on this link…"));
  const pairsBox = h("div", { class: "link-pairs" });
  const tq = timeQuery(t);
  let chosen = new URLSearchParams(location.search).get("job") ?? "";

  const loadPairs = async () => {
    if (!chosen) {
      pairsBox.replaceChildren();
      return;
    }
    pairsBox.replaceChildren(loading(`Loading the pairs of job ${chosen}…`));
    try {
      const r = await get<LinkPairs>(`/links/${encodeURIComponent(linkId)}/jobs/${encodeURIComponent(chosen)}/pairs`, { limit: 200 }, signal);
      pairsBox.replaceChildren(
        h("h3", { class: "sub-head" }, "Pairs of job ", link(`/jobs/${encodeURIComponent(chosen)}${tq}`, chosen), " on this link (cumulative)"),
        h(
          "div",
          { class: "grid2 pad" },
          ...r.directions.map((d, k) =>
            h(
              "div",
              {},
              h("div", { class: "dir-head" }, `${k === 0 ? "A → B" : "B → A"}: ${fmt.bytes(d.bytes)} · ${fmt.count(d.total_pairs)} pair${d.total_pairs === 1 ? "" : "s"}`),
              table({
                label: `Pairs ${k === 0 ? "A to B" : "B to A"}`,
                param: k === 0 ? "pa" : "pb",
                rows: d.pairs,
                defaultSort: "bytes",
                pageSize: 10,
                empty: "No pair of this job crosses the link this way.",
                columns: [
                  { key: "src", label: "From", value: (p) => p.src_rank, cell: (p) => (p.src_rank >= 0 ? `rank ${p.src_rank} (${p.src_node})` : p.src_node) },
                  { key: "dst", label: "To", value: (p) => p.dst_rank, cell: (p) => (p.dst_rank >= 0 ? `rank ${p.dst_rank} (${p.dst_node})` : p.dst_node) },
                  { key: "bytes", label: "Bytes", value: (p) => p.bytes, cell: (p) => fmt.bytes(p.bytes), numeric: true },
                ],
              }),
            ),
          ),
        ),
      );
    } catch (err) {
      if (signal.aborted) return;
      pairsBox.replaceChildren(h("div", { class: "state empty" }, `Pairs unavailable: ${err instanceof Error ? err.message : String(err)}`));
    }
  };

  const load = async () => {
    try {
      const r = await get<LinkJobs>(`/links/${encodeURIComponent(linkId)}/jobs`, rangeParams(t, 3600), signal);
      // Every figure here is over the range, said once above the cards: a
      // job's page links here with its own range, so its figures and these
      // are the same.
      const range = h("p", { class: "panel-note link-jobs-range", "data-from": r.from, "data-to": r.to }, `Over ${fmt.time(r.from)} – ${fmt.time(r.to)}: what the counters measured, what monitored jobs put on each direction, and how much of it they explain.`);
      const dirs = r.directions.map((d) =>
        h(
          "div",
          { class: "card", "data-from": `${d.from.guid}:${d.from.port}` },
          h("div", { class: "card-title" }, dirLabel(d, r.link)),
          h(
            "div",
            { class: "metrics" },
            // The one measured figure: the range's, which the check's
            // sentence below names too.
            metricBox("Measured", d.measured.measured ? fmt.bytes(d.measured.bytes) : "not swept"),
            metricBox("Measured load", d.measured.measured ? fmt.pct(d.measured_utilization_pct) : "–"),
            metricBox("By monitored jobs", fmt.bytes(d.monitored_bytes)),
            metricBox("Jobs' load", fmt.pct(d.monitored_utilization_pct)),
            metricBox("Other traffic", fmt.bytes(d.unmonitored_bytes)),
            metricBox("Explained", explainedText(d), flagged(d) ? "bad" : ""),
          ),
          checkNote(d),
        ),
      );
      const choose = (job: string) => {
        chosen = chosen === job ? "" : job;
        const q = new URLSearchParams(location.search);
        if (chosen) q.set("job", chosen);
        else q.delete("job");
        setQuery(q);
        void load();
      };
      // With a job chosen, the jobs that did not run at the same time as
      // it are said so: their traffic lies in the range (a job's last
      // interval is attributed at the sweep after it ended), but they never
      // shared the link with it.
      const mine = r.jobs.find((x) => x.job === chosen && x.start);
      const ran = (x: JobOnLink): string => {
        if (!x.start) return "–";
        const when = `${fmt.time(x.start)} – ${x.end ? fmt.time(x.end) : "running"}`;
        if (!mine || x.job === chosen) return when;
        const s = Date.parse(x.start);
        const e = x.end ? Date.parse(x.end) : Date.now();
        const ms = Date.parse(mine.start!);
        const me = mine.end ? Date.parse(mine.end) : Date.now();
        return e <= ms ? `${when} (before ${chosen})` : s >= me ? `${when} (after ${chosen})` : when;
      };
      el.replaceChildren(
        range,
        h("div", { class: "cards pad" }, ...dirs),
        table({
          label: "Jobs on this link",
          param: "j",
          rows: r.jobs,
          defaultSort: "bytes",
          pageSize: 20,
          empty: "No monitored job sent traffic over this link in this time range.",
          rowClass: (x) => (x.anonymized ? "anon" : x.job === chosen ? "chosen" : ""),
          columns: [
            { key: "job", label: "Job", value: (x) => x.job, cell: (x) => jobLabel(x, tq) },
            { key: "user", label: "User", value: (x) => x.user ?? "", cell: (x) => (x.anonymized ? "–" : (x.user ?? "")) },
            { key: "dir", label: "Direction", value: (x) => x.from_description, cell: (x) => `${x.from_description} → ${x.to_description}` },
            { key: "bytes", label: "Bytes", value: (x) => x.bytes, cell: (x) => fmt.bytes(x.bytes), numeric: true },
            { key: "util", label: "Utilization", value: (x) => x.utilization_pct, cell: (x) => fmt.pct(x.utilization_pct), numeric: true },
            { key: "ran", label: "Ran", value: (x) => x.start ?? "", cell: (x) => ran(x) },
            // On an Ethernet fabric, how the job's bytes on the direction
            // were split over equal-cost paths.
            ...(r.route_model ? [{ key: "model", label: "Route model", value: (x: JobOnLink) => splitText(x, r.route_model), cell: (x: JobOnLink) => h("span", { class: "route-model" }, splitText(x, r.route_model)) }] : []),
            {
              key: "pairs",
              label: "Pairs",
              value: (x) => x.job,
              cell: (x: JobOnLink) =>
                x.anonymized ? "" : h("button", { type: "button", class: "btn small", "aria-pressed": String(x.job === chosen), "data-job": x.job, onclick: () => choose(x.job) }, x.job === chosen ? "Hide pairs" : "Show pairs"),
            },
          ],
        }),
        pairsBox,
      );
      await loadPairs();
    } catch (err) {
      if (signal.aborted) return;
      el.replaceChildren(h("div", { class: "state empty" }, `Jobs on this link unavailable: ${err instanceof Error ? err.message : String(err)}`));
    }
  };
  return { el, load };
}

function metricBox(label: string, value: string, cls = ""): HTMLElement {
  return h("div", { class: `metric ${cls}`, "data-metric": label }, h("div", { class: "metric-label" }, label), h("div", { class: "metric-value" }, value));
}
