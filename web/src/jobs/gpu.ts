// The job page's GPU panels (GET /jobs/{job}/gpu, docs/gpu.md): where the
// MPI buffers lived and which paths between host (H) and device (D) memory
// the messages took, inside and across nodes; and the NCCL operations
// summed over ranks. Each says where its figures come from, and neither is
// shown for a job without such data.
import { h } from "../dom";
import * as fmt from "../format";
import { table } from "../table";
import type { GpuBuffers, GpuFunctionKinds, GpuPathRow, NcclOpTotal, NcclSummary } from "./api";
import { seconds } from "./profile";

/** Whether the buffers panel has anything to show: a rank was probed, or
 * CUDA was loaded and the probe failed (which the panel says). */
export const hasBuffers = (b: GpuBuffers): boolean => b.probed_ranks > 0 || (b.probe_errors?.length ?? 0) > 0;

/** Whether the NCCL panel has anything to show. */
export const hasNccl = (n: NcclSummary): boolean => n.ops.length > 0;

const PATH_ORDER = ["H->H", "H->D", "D->H", "D->D", "H->?", "D->?", "?->H", "?->D"];
const LOCALITY_ORDER = ["intra-node", "inter-node", "unknown", "all"];

const splitText = (s: GpuPathRow["split"]): string => (s === "mixed" || s === "counts differ" ? `${s}: not determined` : s);

/** Bytes as the pages show them, the exact count (and of what) in the title. */
const bytesCell = (n: number, of = ""): HTMLElement => h("span", { class: "exact-bytes", title: `${n} bytes${of}`, "data-bytes": n }, fmt.bytes(n));

/** The buffers panel's body. */
export function buffersView(b: GpuBuffers): HTMLElement {
  const note = h(
    "p",
    { class: "panel-note gpu-source" },
    `Source: ${b.source}; ${fmt.count(b.probed_ranks)} of ${fmt.plural(b.ranks, "rank")} probed. `,
    "H is host memory (pageable or pinned), D device or managed memory; a path is the sender's memory → the receiver's. ",
    "Point-to-point messages. Exact: both sides counted the same messages and bytes and one side used one kind of memory, so the other side's split is the paths'. ",
    "Mixed: both sides used both kinds, so the paths are not determined — H->? and D->? give the sender's count, ?->H and ?->D the receiver's, of the same messages. Counts differ: the two sides did not count the same messages and bytes (a receive posted larger than its message, or in flight), so the paths are not determined either. ",
    "Receiver (sender) unknown: that side has no row for the other (not probed, MPI_ANY_SOURCE, or not among its agent's busiest peers).",
  );
  const errors = (b.probe_errors ?? []).map((e) => h("p", { class: "panel-note warn-text" }, `Probe failed on ${fmt.count(e.ranks)} rank${e.ranks === 1 ? "" : "s"} (rank ${e.first_rank} first): ${e.error}`));
  const order = (r: GpuPathRow) => PATH_ORDER.indexOf(r.path) * 10 + LOCALITY_ORDER.indexOf(r.locality);
  // A path's total over localities where it took more than one.
  const spread = (r: GpuPathRow) => b.paths.filter((x) => x.path === r.path && x.split === r.split).length > 1;
  const paths = table<GpuPathRow>({
    label: "Paths of the MPI messages",
    param: "gp",
    rows: [...b.paths, ...b.path_totals.filter(spread)],
    defaultSort: "path",
    defaultDir: "asc",
    pageSize: 40,
    empty: "No traffic between probed ranks.",
    rowClass: (r) => (r.locality === "all" ? "gpu-total" : ""),
    columns: [
      { key: "path", label: "Path", value: order, cell: (r) => h("code", {}, r.path) },
      { key: "where", label: "Where", value: (r) => r.locality, cell: (r) => (r.locality === "all" ? "all (total)" : r.locality) },
      { key: "bytes", label: "Bytes", value: (r) => r.bytes, cell: (r) => bytesCell(r.bytes), numeric: true },
      { key: "msgs", label: "Messages", value: (r) => r.msgs, cell: (r) => fmt.count(r.msgs), numeric: true },
      { key: "split", label: "Split", value: (r) => r.split, cell: (r) => h("span", { class: r.exact ? "" : "warn-text" }, splitText(r.split)) },
    ],
  });
  paths.classList.add("gpu-paths");
  const fnCols = (["send", "recv"] as const).flatMap((side) =>
    (["pageable", "pinned", "device", "managed"] as const).map((kind) => ({
      key: `${side}-${kind}`,
      label: `${side === "send" ? "Sent from" : "Received into"} ${kind}`,
      value: (x: GpuFunctionKinds) => x[side][kind].bytes,
      cell: (x: GpuFunctionKinds) => bytesCell(x[side][kind].bytes, ` in ${x[side][kind].msgs} buffers`),
      numeric: true,
      title: "Bytes of the buffers the calls named (hover a cell for their number)",
    })),
  );
  const functions = table<GpuFunctionKinds>({
    label: "Buffer kinds per MPI function",
    param: "gf",
    rows: b.functions,
    defaultSort: "name",
    defaultDir: "asc",
    pageSize: 20,
    empty: "No MPI call named a buffer on a probed rank.",
    columns: [
      { key: "name", label: "Function", value: (x) => x.name, cell: (x) => h("code", {}, x.name) },
      { key: "ranks", label: "Ranks", value: (x) => x.ranks, cell: (x) => fmt.count(x.ranks), numeric: true },
      ...fnCols,
    ],
  });
  functions.classList.add("gpu-functions");
  if (b.probed_ranks === 0) return h("div", { class: "gpu-buffers" }, note, ...errors, h("div", { class: "state empty" }, `Buffers not probed: ${b.not_probed ?? ""}`));
  return h("div", { class: "gpu-buffers" }, note, ...errors, paths, functions);
}

/** The NCCL panel's body. */
export function ncclView(n: NcclSummary): HTMLElement {
  const about = [
    `Source: ${n.source}; ${fmt.count(n.ranks)} rank${n.ranks === 1 ? "" : "s"}`,
    n.versions.length ? `NCCL ${n.versions.join(", ")}` : "",
    n.profiler_interfaces.length ? `profiler interface ${n.profiler_interfaces.map((v) => `v${v}`).join(", ")}` : "",
  ].filter(Boolean);
  const note = h(
    "p",
    { class: "panel-note nccl-source" },
    `${about.join("; ")}. Calls, bytes and time summed over the ranks. `,
    h("span", { class: "nccl-links" }, `Network bytes per peer: ${n.nccl_peers_from}; link attribution: ${n.link_attribution}.`),
  );
  const ops = table<NcclOpTotal>({
    label: "NCCL operations",
    param: "no",
    rows: n.ops,
    defaultSort: "time",
    pageSize: 20,
    empty: "No NCCL operations.",
    columns: [
      { key: "comm", label: "Communicator", value: (x) => x.comm, cell: (x) => h("code", {}, x.comm), title: "NCCL's communicator hash" },
      { key: "size", label: "Size", value: (x) => x.comm_size, numeric: true },
      { key: "name", label: "Operation", value: (x) => x.name, cell: (x) => h("code", {}, x.name) },
      { key: "algo", label: "Algorithm", value: (x) => x.algorithm, cell: (x) => x.algorithm || "–" },
      { key: "proto", label: "Protocol", value: (x) => x.protocol, cell: (x) => x.protocol || "–" },
      { key: "ranks", label: "Ranks", value: (x) => x.ranks, numeric: true },
      { key: "calls", label: "Calls", value: (x) => x.calls, cell: (x) => fmt.count(x.calls), numeric: true },
      { key: "bytes", label: "Bytes", value: (x) => x.bytes, cell: (x) => bytesCell(x.bytes), numeric: true },
      { key: "time", label: "Time", value: (x) => x.time_ns, cell: (x) => h("span", { title: `${x.time_ns} ns`, "data-ns": x.time_ns }, seconds(x.time_ns / 1e9)), numeric: true, title: "From each operation's start to its stop, summed" },
    ],
  });
  ops.classList.add("nccl-ops");
  return h("div", { class: "nccl" }, note, ops);
}
