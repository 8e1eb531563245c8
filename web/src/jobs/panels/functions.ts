// Time per MPI function: the profile's chart per rank (with or without
// MPI_Init/Finalize and the time outside MPI, kept in the address) and the
// table of functions; it hands the profile to the waits panel.
import { get } from "../../api";
import { h, loading, panel } from "../../dom";
import * as fmt from "../../format";
import { table } from "../../table";
import type { FunctionTotal, Profile } from "../api";
import { jobPath } from "../api";
import { profileChart, seconds, SETUP_FUNCTIONS } from "../profile";
import { message } from "./context";
import type { JobContext, JobPanel } from "./context";
import type { WaitsPanel } from "./waits";

export function functionsPanel(ctx: JobContext, waits: WaitsPanel): JobPanel & { el: HTMLElement } {
  const { id, signal, view } = ctx;
  const setupBox = h("input", { type: "checkbox", id: "profile-setup", checked: view.setup });
  const outsideBox = h("input", { type: "checkbox", id: "profile-outside", checked: view.outside });
  const profileBox = h("div", { class: "profile-box" }, loading("Loading the profile…"));
  const functionsBox = h("div", {}, "");

  let profile: Profile | null = null;
  const draw = () => {
    if (!profile) return;
    profileBox.replaceChildren(profileChart(profile, { includeSetup: view.setup, showOutside: view.outside }));
    const nodes = new Map((ctx.detail()?.processes ?? []).map((p) => [p.rank, p.node]));
    waits.draw(profile, (r) => nodes.get(r) ?? "", view.setup);
  };
  for (const [box, key] of [
    [setupBox, "setup"],
    [outsideBox, "outside"],
  ] as const) {
    box.addEventListener("change", () => {
      view[key] = box.checked;
      ctx.saveView();
      draw();
    });
  }
  const load = async () => {
    try {
      const r = await get<{ profile: Profile }>(jobPath(id, "/profile"), {}, signal);
      profile = r.profile;
      draw();
      const waitNs = r.profile.wait_ns !== undefined;
      functionsBox.replaceChildren(
        table({
          label: "MPI functions",
          param: "f",
          rows: r.profile.totals,
          defaultSort: "time",
          defaultDir: "desc",
          pageSize: 15,
          empty: "No MPI calls recorded yet.",
          rowClass: (x) => (SETUP_FUNCTIONS.includes(x.name) ? "dim" : ""),
          columns: [
            { key: "name", label: "Function", value: (x) => x.name, cell: (x) => h("code", {}, x.name) },
            { key: "calls", label: "Calls", value: (x) => x.calls, cell: (x) => fmt.count(x.calls), numeric: true },
            { key: "time", label: "Time", value: (x) => x.time_ns, cell: (x) => seconds(x.time_ns / 1e9), numeric: true, title: "Summed over ranks" },
            ...(waitNs
              ? [{ key: "wait", label: "Wait before", value: (x: FunctionTotal) => x.wait_ns ?? 0, cell: (x: FunctionTotal) => (x.wait_ns ? seconds(x.wait_ns / 1e9) : "–"), numeric: true, title: "Waiting for the last rank before the collective, or in MPI_Recv or MPI_Sendrecv for a late sender (--waits), summed over ranks" }]
              : []),
            { key: "pct", label: "% of MPI", value: (x) => x.mpi_percent, cell: (x) => fmt.pct(x.mpi_percent), numeric: true },
            { key: "sent", label: "Sent", value: (x) => x.bytes_sent, cell: (x) => fmt.bytes(x.bytes_sent), numeric: true },
            { key: "recv", label: "Received", value: (x) => x.bytes_received, cell: (x) => fmt.bytes(x.bytes_received), numeric: true },
            { key: "ranks", label: "Ranks", value: (x) => x.ranks, cell: (x) => fmt.count(x.ranks), numeric: true },
          ],
        }),
      );
    } catch (err) {
      if (signal.aborted) return;
      profileBox.replaceChildren(h("div", { class: "state error" }, message(err)));
      waits.fail(message(err));
    }
  };
  return {
    el: panel(
      "Time per MPI function",
      h("div", {}, profileBox, functionsBox),
      h(
        "div",
        { class: "panel-tools" },
        h("label", { class: "check" }, setupBox, " MPI_Init / Finalize"),
        h("label", { class: "check" }, outsideBox, " time outside MPI"),
      ),
    ),
    load,
  };
}
