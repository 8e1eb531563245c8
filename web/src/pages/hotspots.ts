// The hot-spots page (GET /api/v1/hotspots, docs/api.md): the busiest link
// directions over the chosen time (live: the daemon's default window of
// three sweeps; a point in time: that window ending there; a range: the
// range), most utilized first, each with its ports, utilization, the bytes
// the jobs on it were attributed and how the route model split them; and
// the fabric's ECMP collisions in that time, with the view the job page
// shows (jobs/panels/collisions.ts): the flows and their jobs, the shared
// uplink's bytes beside the least loaded one's, and the imbalance.
import type { PortRef } from "../api";
import { get } from "../api";
import { h, link, loading, panel } from "../dom";
import * as fmt from "../format";
import type { Collision } from "../jobs/panels/collisions";
import { collisionView } from "../jobs/panels/collisions";
import { jobLabel } from "../jobs/linkjobs";
import { listedText } from "../listed";
import { refreshOnSweep } from "../live";
import { minFilter } from "../minfilter";
import type { NamedEnds } from "../ports";
import { dirLabel } from "../ports";
import type { SplitModel } from "../jobs/api";
import { splitText } from "../routemodel";
import type { PageContext } from "../router";
import { table } from "../table";
import { atParams, readTime, timeQuery } from "../time";
import type { TimeView } from "../time";

interface HotJob extends SplitModel {
  job: string;
  user?: string;
  bytes: number;
  utilization_pct: number;
  anonymized?: boolean;
}

export interface HotSpot extends SplitModel {
  link: NamedEnds & { id: string; capacity_bytes_per_second: number };
  from: PortRef;
  to: PortRef;
  from_description: string;
  to_description: string;
  measured_utilization_pct: number;
  monitored_utilization_pct: number;
  utilization_pct: number;
  xmit_wait: number;
  monitored_bytes: number;
  jobs: HotJob[];
}

export interface HotSpotsResponse {
  from: string;
  to: string;
  min_utilization: number;
  hotspots: HotSpot[];
  collisions: Collision[];
  route_model?: string;
  total: number;
  limit: number;
  truncated?: boolean;
}

/** The defaults of the page's filters (the API's own). */
export const DEFAULT_MIN_UTILIZATION = 50;
export const DEFAULT_LIMIT = 50;

/** The API's parameters for a time view: a range as its end and length. */
export function hotspotParams(t: TimeView, minUtil: number, limit: number): Record<string, string> {
  const p: Record<string, string> = { min_utilization: String(minUtil), limit: String(limit), ...atParams(t) };
  if (t.mode === "range") p.window = `${t.to! - t.from!}s`;
  return p;
}

/** What the imbalance figure means, said once under the collisions. */
export const IMBALANCE_NOTE =
  "Imbalance: the busiest uplink of a switch's equal-cost group over the group's mean; 1.00 is an even spread, and a group of n uplinks reads n when one uplink carried everything.";

export async function hotspotsPage(ctx: PageContext): Promise<void> {
  const t = readTime();
  const { root, signal, search } = ctx;
  const num = (k: string, dflt: number, lo: number, hi: number) => {
    const v = Number(search.get(k) ?? dflt);
    return Number.isFinite(v) && v >= lo && v <= hi ? v : dflt;
  };
  const minUtil = num("min", DEFAULT_MIN_UTILIZATION, 0, 1000);
  const limit = Math.round(num("limit", DEFAULT_LIMIT, 1, 100000));
  const form = minFilter({ id: "min-util", label: "Show link directions at or above", unit: "% utilization", value: minUtil, min: 0, max: 1000, step: "any" });
  const summary = h("p", { class: "sub hotspots-summary" }, "\u00a0");
  const listed = h("p", { class: "listed hotspots-listed" });
  const body = h("div", {}, loading("Ranking link directions…"));
  const colSummary = h("p", { class: "collisions-summary" });
  const colBody = h("div", { class: "collisions-list" });
  root.append(
    h("div", { class: "page-head" }, h("h1", {}, "Hot spots"), summary),
    form,
    panel("Busiest link directions", h("div", {}, listed, body)),
    h("section", { class: "panel collisions-panel" }, h("header", {}, h("h2", {}, "ECMP collisions (sFlow)")), colSummary, colBody, h("p", { class: "note imbalance-note" }, IMBALANCE_NOTE)),
  );

  const load = async () => {
    const r = await get<HotSpotsResponse>("/hotspots", hotspotParams(t, minUtil, limit), signal);
    summary.textContent = `Link directions at or above ${fmt.pct(r.min_utilization)} utilization from ${fmt.time(r.from)} to ${fmt.time(r.to)}, the busiest first.`;
    listed.textContent = listedText(r.hotspots.length, r.total, "link direction", `at or above ${fmt.pct(r.min_utilization)} utilization`);
    const tq = timeQuery(t);
    body.replaceChildren(
      table<HotSpot>({
        label: "Busiest link directions",
        rows: r.hotspots,
        defaultSort: "util",
        param: "hs",
        empty: "No link direction reached the threshold in this time.",
        columns: [
          { key: "dir", label: "Direction", value: (d) => dirLabel(d), cell: (d) => link(`/links/${d.link.id}${tq}`, dirLabel(d)) },
          { key: "util", label: "Utilization", value: (d) => d.utilization_pct, cell: (d) => fmt.pct(d.utilization_pct), numeric: true, title: "The larger of the counters' (measured) and the jobs' attributed (monitored) utilization" },
          { key: "measured", label: "Measured", value: (d) => d.measured_utilization_pct, cell: (d) => fmt.pct(d.measured_utilization_pct), numeric: true, title: "From the newest counter sample" },
          { key: "bytes", label: "Jobs' bytes", value: (d) => d.monitored_bytes, cell: (d) => fmt.bytes(d.monitored_bytes), numeric: true, title: "The jobs' attributed bytes over the window" },
          { key: "wait", label: "XmitWait", value: (d) => d.xmit_wait, cell: (d) => fmt.count(d.xmit_wait), numeric: true },
          {
            key: "jobs",
            label: "Jobs",
            value: (d) => d.jobs.length,
            cell: (d) =>
              d.jobs.length
                ? h("span", { class: "hot-jobs" }, ...d.jobs.flatMap((j, i) => [i ? ", " : "", jobLabel(j, tq), ` ${fmt.bytes(j.bytes)}`]))
                : "—",
          },
          { key: "model", label: "Route model", value: (d) => splitText(d, r.route_model), cell: (d) => h("span", { class: "route-model" }, splitText(d, r.route_model)) },
        ],
      }),
    );
    const cs = r.collisions ?? [];
    colSummary.textContent = cs.length
      ? `${fmt.plural(cs.length, "ECMP collision")} in this time: large flows sharing an uplink while an equal-cost uplink of the same switch carried less.`
      : "No ECMP collisions in this time: no switch's sampled large flows shared an uplink while an equal-cost one carried less.";
    colBody.replaceChildren(...cs.map(collisionView));
  };
  await load();
  root.dataset.ready = "true";
  if (t.mode === "live") refreshOnSweep(() => void load().catch(() => {}), signal, 10000);
}
