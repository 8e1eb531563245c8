// Placement advice (GET /jobs/{job}/placement): where the ranks would cost
// the fabric least, what that saves against the job as it ran and the
// usual placements, the launcher's file to download, and, for a traced
// job that has ended, the advice's time as the model replays it.
import { ApiError, get } from "../../api";
import { h, loading, panel } from "../../dom";
import * as fmt from "../../format";
import { table } from "../../table";
import type { ModelResult, Placement, PlacementCost, PlacementFormat, PlacementLink } from "../api";
import { jobPath } from "../api";
import { message } from "./context";
import type { JobContext, JobPanel } from "./context";
import { calibration, modelSecs, vsAsRan } from "./model";

export function placementPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { id, signal } = ctx;
  const box = h("div", {}, loading("Computing placement advice…"));
  const format = h(
    "select",
    { class: "small-select", "aria-label": "Placement file format" },
    h("option", { value: "openmpi" }, "Open MPI rankfile"),
    h("option", { value: "mpich" }, "MPICH machine file"),
    h("option", { value: "slurm" }, "Slurm host file"),
  );
  const load = async () => {
    try {
      const r = await get<Placement>(jobPath(id, "/placement"), { format: format.value as PlacementFormat }, signal);
      const predicted = h("div", { class: "placement-predicted" });
      box.replaceChildren(placementView(r), predicted);
      // The advice's time, where a trace lets the model replay it: a gain
      // in bytes x hops is a promise only the replay can weigh.
      const j = ctx.detail()?.job;
      if (r.nothing_to_gain) return;
      if (!j?.trace_dir || j.state !== "finished") {
        predicted.replaceChildren(
          h("p", { class: "panel-note" }, j?.trace_dir ? "Its predicted time comes when the job has ended." : "No predicted time: the job was not traced (netloom run --trace). Fewer bytes × hops shorten the job only as far as it waits on its traffic."),
        );
        return;
      }
      // The replay takes a while: the page is ready without it.
      predicted.replaceChildren(h("p", { class: "panel-note" }, "Replaying the advice…"));
      void get<ModelResult>(jobPath(id, "/model"), { placement: "advice" }, signal)
        .then((m) => predicted.replaceChildren(placementPrediction(m)))
        .catch((err) => {
          if (!signal.aborted) predicted.replaceChildren(h("p", { class: "panel-note" }, `No predicted time: ${message(err)}`));
        });
    } catch (err) {
      if (signal.aborted) return;
      const missing = err instanceof ApiError && (err.status === 404 || err.status === 405);
      box.replaceChildren(h("div", { class: "state empty" }, missing ? "Placement advice is not available from this daemon." : `No placement advice: ${message(err)}`));
    }
  };
  format.addEventListener("change", () => void load());
  return { el: panel("Placement advice", box, format), load };
}

/** The advice replayed: its time against the replay of the job as it ran. */
function placementPrediction(r: ModelResult): HTMLElement {
  const p = r.what_ifs.find((x) => x.scenario === "placement");
  if (!p) return h("p", { class: "panel-note" }, "No predicted time for the advice.");
  const flat = p.vs_as_ran_pct != null && Math.abs(p.vs_as_ran_pct) < 1;
  return h(
    "div",
    {},
    h(
      "p",
      { class: "panel-note placement-time" },
      `Predicted elapsed (the trace replayed on ${r.platform}): placed as advised ${modelSecs(p.elapsed_seconds)}, ${vsAsRan(p)} against the replay as it ran; ${calibration(r)}.`,
      flat ? " The replay expects no change of the elapsed time: the job's time is not in the traffic the advice moves." : "",
    ),
    r.warnings?.length ? h("p", { class: "warn-text" }, r.warnings.join(" · ")) : "",
  );
}

/** A figure's change in words, from a gain (positive: the advice costs less). */
function change(what: string, gainPct: number): string {
  if (gainPct > 0) return `cut ${what} by ${fmt.pct(gainPct)}`;
  if (gainPct < 0) return `raise ${what} by ${fmt.pct(-gainPct)}`;
  return `leave ${what} as it is`;
}

/** The advice: the predicted gain, the costs compared and the file. */
function placementView(r: Placement): HTMLElement {
  const g = r.gain["as_ran"];
  const headline = r.nothing_to_gain
    ? h("p", { class: "panel-note" }, `Nothing to gain: ${r.reason ?? "the job as it ran is as good as any placement found"}.`)
    : h(
        "p",
        { class: "panel-note" },
        g
          ? `Placing the ranks as advised would ${change("the job's bytes × hops", g.byte_hops_pct)}, ${change("its inter-node bytes", g.inter_node_bytes_pct)} and ${change("its heaviest link's load", g.heaviest_link_pct)} (bytes × hops: every inter-node byte counted once for each link its route crosses).`
          : `The job as it ran cannot be judged${r.as_ran_unknown ? ` (${r.as_ran_unknown})` : ""}; the advice is compared with the usual placements below.`,
      );
  const rows: { name: string; c: PlacementCost | null }[] = [
    { name: "As it ran", c: r.as_ran },
    { name: "Advice", c: r.advice },
    { name: "Round-robin", c: r.round_robin },
    { name: "Block", c: r.block },
    { name: "Random", c: r.random },
  ];
  const costs = table<{ name: string; c: PlacementCost | null }>({
    label: "Placement costs",
    param: "pl",
    rows,
    defaultSort: "hops",
    defaultDir: "asc",
    empty: "No placements.",
    pageSize: 10,
    columns: [
      { key: "name", label: "Placement", value: (x) => x.name },
      { key: "inter", label: "Inter-node bytes", value: (x) => x.c?.inter_node_bytes ?? -1, cell: (x) => (x.c ? fmt.bytes(x.c.inter_node_bytes) : "–"), numeric: true },
      { key: "hops", label: "Bytes × hops", value: (x) => x.c?.byte_hops ?? -1, cell: (x) => (x.c ? fmt.count(x.c.byte_hops) : "–"), numeric: true, title: "Bytes weighted by the hops of their routes" },
      {
        key: "heavy",
        label: "Heaviest link",
        value: (x) => x.c?.heaviest_link?.bytes ?? -1,
        cell: (x) => (x.c?.heaviest_link ? heaviestLink(x.c.heaviest_link) : "–"),
        numeric: true,
      },
      { key: "nodes", label: "Nodes used", value: (x) => x.c?.nodes_used ?? -1, cell: (x) => (x.c ? String(x.c.nodes_used) : "–"), numeric: true },
    ],
  });
  const url = URL.createObjectURL(new Blob([r.file.content], { type: "text/plain" }));
  const download = h("a", { class: "btn", href: url, download: `${r.job}.${r.file.name}` }, `Download the ${r.file.name}`);
  const about = h(
    "p",
    { class: "panel-note" },
    `${r.ranks} ranks on ${r.nodes.length} node${r.nodes.length === 1 ? "" : "s"}, by ${r.method} in ${r.seconds.toFixed(2)} s`,
    r.peers_truncated ? h("span", { class: "warn-text" }, " · some ranks reported only their top peers: the traffic is a lower bound") : "",
  );
  return h("div", { class: "placement" }, headline, about, costs, r.nothing_to_gain ? "" : download);
}

// heaviestLink is the load, and which direction carries it when the
// answer says (an administrator's; a user's leaves the switches out).
function heaviestLink(l: PlacementLink): string {
  const where = l.from_description !== undefined && l.to_description !== undefined ? ` (${l.from_description} → ${l.to_description})` : "";
  return fmt.bytes(l.bytes) + where;
}
