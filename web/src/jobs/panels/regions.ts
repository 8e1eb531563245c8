// The job's regions (netloom_region_begin/end, MPI_Pcontrol): entries,
// time, MPI time and bytes by class.
import { get } from "../../api";
import { h, loading, panel } from "../../dom";
import * as fmt from "../../format";
import { table } from "../../table";
import type { RegionTotal } from "../api";
import { jobPath } from "../api";
import { seconds } from "../profile";
import { message } from "./context";
import type { JobContext, JobPanel } from "./context";

export function regionsPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const { id, signal } = ctx;
  const box = h("div", {}, loading("Loading regions…"));
  const load = async () => {
    try {
      const r = await get<{ regions: RegionTotal[] }>(jobPath(id, "/regions"), {}, signal);
      box.replaceChildren(
        table<RegionTotal>({
          label: "Regions",
          param: "r",
          rows: r.regions,
          defaultSort: "time",
          defaultDir: "desc",
          pageSize: 20,
          empty: "No regions: mark phases with netloom_region_begin/end or MPI_Pcontrol.",
          columns: [
            { key: "name", label: "Region", value: (x) => x.name },
            { key: "entries", label: "Entries", value: (x) => x.entries, cell: (x) => fmt.count(x.entries), numeric: true },
            { key: "time", label: "Time", value: (x) => x.time_ns, cell: (x) => seconds(x.time_ns / 1e9), numeric: true, title: "Wall time inside, summed over ranks" },
            { key: "mpi", label: "MPI time", value: (x) => x.mpi_time_ns, cell: (x) => seconds(x.mpi_time_ns / 1e9), numeric: true },
            { key: "p2p", label: "P2P", value: (x) => x.p2p.bytes, cell: (x) => fmt.bytes(x.p2p.bytes), numeric: true },
            { key: "coll", label: "Coll", value: (x) => x.coll.bytes, cell: (x) => fmt.bytes(x.coll.bytes), numeric: true },
            { key: "rma", label: "RMA", value: (x) => x.rma.bytes, cell: (x) => fmt.bytes(x.rma.bytes), numeric: true },
            { key: "ranks", label: "Ranks", value: (x) => x.ranks.length, cell: (x) => fmt.count(x.ranks.length), numeric: true },
          ],
        }),
      );
    } catch (err) {
      if (signal.aborted) return;
      box.replaceChildren(h("div", { class: "state error" }, message(err)));
    }
  };
  return { el: panel("Regions", box), load };
}
