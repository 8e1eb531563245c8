// What would help: the job's trace replayed (SimGrid) as it ran, on a
// perfect network and with twice the bandwidth (GET /jobs/{job}/model).
import { get } from "../../api";
import { h, loading, panel } from "../../dom";
import * as fmt from "../../format";
import { table } from "../../table";
import type { ModelPrediction, ModelResult } from "../api";
import { jobPath } from "../api";
import { message } from "./context";
import type { JobContext, JobPanel } from "./context";

const notTraced = "Run the job with netloom run --trace --output DIR (DIR where this daemon can read it) to see what a faster network or no network cost would change.";

export function modelPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { id, signal } = ctx;
  const box = h("div", { class: "model-box" }, loading("Replaying the job's trace…"));
  const load = async () => {
    const j = ctx.detail()?.job;
    if (!j?.trace_dir) {
      box.replaceChildren(h("div", { class: "state empty" }, notTraced));
      return;
    }
    if (j.state !== "finished") {
      box.replaceChildren(h("div", { class: "state empty" }, "The predictions come when the job has ended: its ranks write their traces at MPI_Finalize."));
      return;
    }
    try {
      box.replaceChildren(modelView(await get<ModelResult>(jobPath(id, "/model"), {}, signal)));
    } catch (err) {
      if (signal.aborted) return;
      box.replaceChildren(h("div", { class: "state empty" }, `No prediction: ${message(err)}`));
    }
  };
  return { el: panel("What would help", box), load };
}

/** Seconds as the replay's answers show them. */
export const modelSecs = (s: number) => `${s.toFixed(s < 1 ? 4 : 2)} s`;
/** A what-if's change against the replay as it ran (the API's vs_as_ran_pct). */
export const vsAsRan = (p: ModelPrediction) => (p.vs_as_ran_pct == null ? "–" : `${p.vs_as_ran_pct <= 0 ? "−" : "+"}${fmt.pct(Math.abs(p.vs_as_ran_pct))}`);
/** The replay as it ran against the measured run: the model's calibration. */
export const calibration = (r: ModelResult) =>
  `the replay as it ran takes ${modelSecs(r.as_ran.elapsed_seconds)}, ${fmt.pct((100 * r.as_ran.elapsed_seconds) / r.measured.elapsed_seconds)} of the measured ${modelSecs(r.measured.elapsed_seconds)} (the model's calibration)`;

function modelView(r: ModelResult): HTMLElement {
  const secs = modelSecs;
  const perfect = r.what_ifs.find((p) => p.scenario === "perfect network");
  const headline = h(
    "p",
    { class: "panel-note model-headline" },
    `Measured ${secs(r.measured.elapsed_seconds)}; ${calibration(r)} on ${r.platform}`,
    perfect ? `; a perfect network would take ${secs(perfect.elapsed_seconds)} (${vsAsRan(perfect)} against the replay as it ran): the rest is compute and waiting for other ranks` : "",
    ".",
  );
  const preds = [r.as_ran, ...r.what_ifs];
  const scenarios = table<{ name: string; elapsed: number; mpi: number; bytes: number | null; intra?: number; vs?: number }>({
    label: "Predicted time",
    param: "ms",
    rows: [
      { name: "measured", elapsed: r.measured.elapsed_seconds, mpi: r.measured.mpi_seconds, bytes: null },
      ...preds.map((p) => ({ name: p.scenario, elapsed: p.elapsed_seconds, mpi: p.mpi_seconds, bytes: p.inter_node_p2p_bytes, intra: p.intra_node_p2p_bytes, vs: p.vs_as_ran_pct })),
    ],
    defaultSort: "elapsed",
    pageSize: 10,
    empty: "No predictions.",
    columns: [
      { key: "name", label: "Scenario", value: (x) => x.name },
      { key: "elapsed", label: "Elapsed", value: (x) => x.elapsed, cell: (x) => secs(x.elapsed), numeric: true },
      { key: "vs", label: "vs as ran", value: (x) => x.vs ?? 0, cell: (x) => (x.vs == null ? "–" : `${x.vs <= 0 ? "−" : "+"}${fmt.pct(Math.abs(x.vs))}`), numeric: true, title: "The change of the elapsed time against the replay of the job as it ran" },
      { key: "mpi", label: "MPI time (all ranks)", value: (x) => x.mpi, cell: (x) => secs(x.mpi), numeric: true },
      { key: "bytes", label: "Inter-node p2p", value: (x) => x.bytes ?? -1, cell: (x) => (x.bytes == null ? "–" : fmt.bytes(x.bytes)), numeric: true },
      { key: "intra", label: "Intra-node p2p", value: (x) => x.intra ?? -1, cell: (x) => (x.intra == null ? "–" : fmt.bytes(x.intra)), numeric: true, title: "Point-to-point bytes between ranks of one node: they share its loopback" },
    ],
  });
  // Under names both sides share: the replay keeps messages, not the
  // point-to-point calls that posted and completed them.
  const names = [...new Set([...Object.keys(r.measured.function_groups), ...preds.flatMap((p) => Object.keys(p.function_groups))])];
  const functions = table<{ name: string; v: number[] }>({
    label: "Predicted MPI time per function (point-to-point: every point-to-point call together, as the replay keeps messages, not the calls that posted and completed them)",
    param: "mf",
    rows: names.map((n) => ({ name: n, v: [r.measured.function_groups[n] ?? 0, ...preds.map((p) => p.function_groups[n] ?? 0)] })),
    defaultSort: "c0",
    pageSize: 10,
    empty: "No MPI time.",
    columns: [
      { key: "name", label: "Function", value: (x) => x.name },
      ...["measured", ...preds.map((p) => p.scenario)].map((label, i) => ({ key: `c${i}`, label, value: (x: { v: number[] }) => x.v[i], cell: (x: { v: number[] }) => secs(x.v[i]), numeric: true })),
    ],
  });
  const warnings = r.warnings?.length ? h("p", { class: "warn-text" }, r.warnings.join(" · ")) : "";
  return h("div", {}, headline, warnings, scenarios, functions);
}
