// Types of the MPI job endpoints (docs/api.md, "Jobs").
import { get } from "../api";
import type { ProcessUsage, Traffic } from "./record.gen";

// The agent's per-process record, generated from agent.proto (record.gen.ts).
export type { ProcessUsage, Traffic } from "./record.gen";
export { processUsageFields } from "./record.gen";

export interface Classes {
  p2p: Traffic;
  coll: Traffic;
  rma: Traffic;
}

export interface JobSummary {
  id: string;
  state: "running" | "finished";
  end_reason?: string;
  start: string;
  end?: string;
  updated: string;
  duration_seconds: number;
  ranks: number;
  reporting: number;
  finalized: number;
  nodes: number;
  user?: string;
  program?: string;
  mpi_library?: string;
  cpu_seconds: number;
  cpu_percent: number;
  mpi_seconds: number;
  mpi_percent: number;
  memory_bytes: number;
  memory_peak_bytes: number;
  io_read_bytes: number;
  io_write_bytes: number;
  mpiio_read_bytes: number;
  mpiio_write_bytes: number;
  traffic: Classes;
  total: Traffic;
  intra_node: Traffic;
  inter_node: Traffic;
  agent_datagrams_dropped: number;
  peers_truncated: boolean;
  traffic_model?: "physical" | "logical";
  trace_dir?: string; // where its ranks wrote replay traces (netloom run --trace)
}

export interface JobList {
  total: number;
  offset: number;
  limit: number;
  sort: string;
  order: "asc" | "desc";
  jobs: JobSummary[];
}

/** One rank: who it is, its ratios, and every counter and gauge of its
 * process block (ProcessUsage). */
export interface ProcessView extends ProcessUsage {
  rank: number;
  node: string;
  host: string;
  pid: number;
  cpu: number;
  time: string;
  seq: number;
  final: boolean;
  cpu_percent: number;
  mpi_percent: number;
  traffic: Classes;
  total: Traffic;
  /** netloom_reorder calls the rank took part in (docs/reorder.md); absent when none. */
  reorders?: RankReorder[];
}

/** One netloom_reorder call as one rank recorded it (store.Reorder). */
export interface RankReorder {
  index: number;
  time: string;
  ranks: number;
  comm_world: boolean;
  nodes: number;
  method: string; // "scotch" | "kept"
  moved: number;
  old_rank: number;
  new_rank: number;
  inter_node_before: number;
  inter_node_after: number;
  total_bytes: number;
  since?: string;
  seconds: number;
  map_seconds: number;
}

export interface NodeView {
  node: string;
  hosts: string[];
  ranks: number[];
  cpu_seconds: number;
  cpu_percent: number;
  mpi_seconds: number;
  memory_bytes: number;
  memory_peak_bytes: number;
  io_read_bytes: number;
  io_write_bytes: number;
  traffic: Classes;
  total: Traffic;
  intra_node: Traffic;
  inter_node: Traffic;
}

export interface JobDetail {
  job: JobSummary;
  nodes: NodeView[];
  processes: ProcessView[];
}

export interface JobSeries {
  series: { time: number[]; span_seconds: number[]; values: Record<string, number[]> };
}

/** A communication matrix as its non-zero cells (format=sparse): row =
 * sender. Rank matrices carry no labels (ranks are 0..size-1). */
export interface MatrixResponse {
  level: "rank" | "node";
  class: string;
  metric: "bytes" | "msgs";
  size: number;
  labels?: string[];
  src: number[];
  dst: number[];
  values: number[];
  peers_truncated: boolean;
}

export interface Histogram {
  bin_min_bytes: number[];
  job: number[];
  ranks: number[];
  per_rank: number[][];
  peers?: Record<string, number[]>;
}

export interface FunctionTotal {
  name: string;
  calls: number;
  time_ns: number;
  /** The wait for the last rank before it (--waits), summed over ranks;
   * absent when none. */
  wait_ns?: number;
  bytes_sent: number;
  bytes_received: number;
  ranks: number;
  mpi_percent: number;
}

export interface Profile {
  functions: string[];
  ranks: number[];
  time_ns: number[][];
  /** [rank][function]: the wait for the last rank before each blocking
   * collective, when the job ran with --waits; absent without. */
  wait_ns?: number[][];
  calls: number[][];
  bytes_sent: number[][];
  bytes_received: number[][];
  wall_seconds: number[];
  mpi_seconds: number[];
  totals: FunctionTotal[];
}

export interface RegionTotal extends Classes {
  name: string;
  entries: number;
  time_ns: number;
  mpi_time_ns: number;
  ranks: number[];
}

/** Sort keys of GET /jobs (docs/api.md). */
export type JobSort =
  | "start"
  | "end"
  | "updated"
  | "duration"
  | "ranks"
  | "nodes"
  | "cpu"
  | "cpu_seconds"
  | "mpi"
  | "mpi_seconds"
  | "memory"
  | "memory_peak"
  | "io"
  | "bytes"
  | "msgs"
  | "inter_node_bytes"
  | "intra_node_bytes"
  | "p2p_bytes"
  | "coll_bytes"
  | "rma_bytes"
  | "p2p_msgs"
  | "coll_msgs"
  | "rma_msgs"
  | "id";

export const jobPath = (id: string, rest = ""): string => `/jobs/${encodeURIComponent(id)}${rest}`;

export function jobDetail(id: string, signal: AbortSignal): Promise<JobDetail> {
  return get<JobDetail>(jobPath(id), {}, signal);
}

// Link attribution (docs/api.md, "Jobs on links").

export interface LinkRef {
  id: string;
  a: { guid: string; port: number };
  b: { guid: string; port: number };
  a_name?: string;
  b_name?: string;
  capacity_bytes_per_second: number;
}

/** How a direction's bytes (or a job's on it) were split over equal-cost
 * paths on Ethernet (docs/sflow.md, "Said per direction"; routemodel.ts
 * writes it). */
export interface SplitModel {
  route_model?: string;
  split_samples?: number;
  split_error_pct?: number;
  split_observed_pct?: number;
}

export interface JobOnLink extends SplitModel {
  /** Another user's job, as a regular user sees it: an id like "other-1"
   * that names no real job, no user, nothing to link to. */
  anonymized?: boolean;
  job: string;
  user?: string;
  link: LinkRef;
  direction: string;
  from: { guid: string; port: number };
  to: { guid: string; port: number };
  from_description: string;
  to_description: string;
  bytes: number;
  utilization_pct: number;
  /** When the job ran (no end while it runs); left out for other users' jobs. */
  start?: string;
  end?: string;
  /** In a job's "why": how long this other job ran at the same time. */
  overlap_seconds?: number;
  /** In a job's "why", a job that did not run at the same time: whether it
   * ran before or after, and how long it ran inside the range. */
  ran?: "before" | "after";
  in_range_seconds?: number;
}

/** The consistency check under an "explained" figure (docs/api.md): whether
 * what the jobs put on a direction fits in what its counters measured,
 * within counter granularity and timing, else the likely cause. */
export interface ExplainedCheck {
  status: "consistent" | "timing" | "inconsistent" | "not_measured" | "not_carried";
  cause?: string;
  message?: string;
  widened_measured_bytes: number;
  tolerance_bytes: number;
  excess_bytes: number;
}

export interface DirectionLoad extends SplitModel {
  from: { guid: string; port: number };
  to: { guid: string; port: number };
  direction: string;
  from_description: string;
  to_description: string;
  measured: { bytes: number; xmit_wait: number; measured: boolean };
  measured_utilization_pct: number;
  monitored_bytes: number;
  monitored_utilization_pct: number;
  unmonitored_bytes: number;
  unmonitored_utilization_pct: number;
  explained_pct: number | null;
  check: ExplainedCheck;
  jobs: JobOnLink[];
}

export interface LinkJobs {
  link: LinkRef;
  /** On an Ethernet fabric, how routes were modelled. */
  route_model?: string;
  from: string;
  to: string;
  jobs: JobOnLink[];
  directions: DirectionLoad[];
}

export interface LinkPairs {
  directions: {
    from: { guid: string; port: number };
    to: { guid: string; port: number };
    direction: string;
    bytes: number;
    total_pairs: number;
    level?: string;
    pairs: { src_rank: number; dst_rank: number; src_node: string; dst_node: string; bytes: number }[];
  }[];
}

export interface Attribution {
  bytes: number;
  unmapped_nodes: string[];
  unmapped_bytes: number;
  intervals: number;
  errors?: string[];
}

export interface WhyLink extends DirectionLoad {
  link: LinkRef;
  job_bytes: number;
  job_share_pct: number;
  utilization_pct: number;
  /** Other jobs on the direction that ran at the same time as this one. */
  others: JobOnLink[];
  /** Jobs whose traffic lies in the range but that ran before or after it. */
  not_overlapping: JobOnLink[];
  others_bytes: number;
  not_overlapping_bytes: number;
}

export interface Why {
  job: string;
  /** On an Ethernet fabric, how routes were modelled (its directions' own
   * route_model says how their bytes were split). */
  route_model?: string;
  /** The range of the figures: the job's life in whole seconds by default. */
  from: string;
  to: string;
  // physical: what the MPI library sent (Open MPI's monitoring), collectives
  // as decomposed; logical: the application's calls; "": no agent.
  traffic_model?: "physical" | "logical" | "";
  attribution?: Attribution;
  links: WhyLink[];
  /** How many directions the job crossed over the range, of which links
   * are the heaviest limit (truncated: fewer listed than crossed). */
  total: number;
  limit: number;
  truncated: boolean;
  sharing_jobs?: { job: string; user?: string; bytes: number; anonymized?: boolean }[];
}

// Placement advice (docs/place.md): GET /jobs/{job}/placement.

// Which direction it is (link, from, to, descriptions) is left out for a
// regular user, who may not see the fabric's switches (fabric_hidden).
export interface PlacementLink {
  link?: string;
  from?: { guid: string; port: number };
  to?: { guid: string; port: number };
  from_description?: string;
  to_description?: string;
  bytes: number;
  job_bytes: number;
}

export interface PlacementCost {
  inter_node_bytes: number;
  intra_node_bytes: number;
  byte_hops: number;
  heaviest_link: PlacementLink | null;
  nodes_used: number;
  links?: PlacementLink[];
}

export interface PlacementGain {
  inter_node_bytes_pct: number;
  byte_hops_pct: number;
  heaviest_link_pct: number;
}

export type PlacementFormat = "openmpi" | "mpich" | "slurm";

export interface Placement {
  job: string;
  ranks: number;
  nodes: { name: string; cores: number }[];
  method: string;
  nothing_to_gain: boolean;
  reason?: string;
  advice: PlacementCost;
  as_ran: PlacementCost | null;
  as_ran_unknown?: string;
  round_robin: PlacementCost;
  block: PlacementCost;
  random: PlacementCost;
  random_seed: number;
  gain: Record<string, PlacementGain | null>;
  traffic_bytes: number;
  peers_truncated: boolean;
  seconds: number;
  mapping: { rank: number; node: string; core: number }[];
  fabric_hidden?: boolean;
  file: { format: PlacementFormat; name: string; content: string };
}

// What-if predictions (docs/model.md): GET /jobs/{job}/model.

export interface ModelPrediction {
  scenario: string;
  platform: string;
  elapsed_seconds: number;
  inter_node_p2p_bytes: number;
  /** Point-to-point bytes between ranks of one node: through its loopback, which they share. */
  intra_node_p2p_bytes: number;
  mpi_seconds: number;
  functions: Record<string, number>;
  /** functions under the names the measurement shares ("point-to-point" for every point-to-point call) */
  function_groups: Record<string, number>;
  /** a what-if's change against the replay as it ran, in percent (absent for the replay as ran) */
  vs_as_ran_pct?: number;
  rank_mpi_seconds: number[];
}

export interface ModelResult {
  job: string;
  ranks: number;
  hosts: number;
  trace_events: number;
  platform: string;
  measured: { elapsed_seconds: number; mpi_seconds: number; functions: Record<string, number>; function_groups: Record<string, number> };
  as_ran: ModelPrediction;
  what_ifs: ModelPrediction[];
  warnings?: string[];
}

// GET /jobs/{job}/gpu (docs/gpu.md): MPI buffers by path between host (H)
// and device (D) memory, and NCCL operations summed over ranks.

/** Traffic by buffer kind. */
export interface BufferKinds {
  pageable: Traffic;
  pinned: Traffic;
  device: Traffic;
  managed: Traffic;
}

/** One row of the paths table: "H->H" … "D->D" when exact; "H->?", "D->?"
 * (the sender's count) and "?->H", "?->D" (the receiver's) when not. */
export interface GpuPathRow extends Traffic {
  path: string;
  locality: "intra-node" | "inter-node" | "unknown" | "all";
  split: "exact" | "mixed" | "counts differ" | "receiver unknown" | "sender unknown";
  exact: boolean;
}

export interface GpuSide {
  host: Traffic;
  device: Traffic;
}

export interface GpuPair {
  from: number;
  to: number;
  locality: string;
  sender: GpuSide | null;
  receiver: GpuSide | null;
  split: GpuPathRow["split"];
  exact: boolean;
  paths?: Record<"H->H" | "H->D" | "D->H" | "D->D", Traffic>;
}

export interface GpuFunctionKinds {
  name: string;
  ranks: number;
  send: BufferKinds;
  recv: BufferKinds;
}

export interface GpuBuffers {
  source: string;
  ranks: number;
  probed_ranks: number;
  not_probed?: string;
  probe_errors?: { error: string; ranks: number; first_rank: number }[];
  paths: GpuPathRow[];
  path_totals: GpuPathRow[];
  pairs: GpuPair[];
  pairs_total: number;
  functions: GpuFunctionKinds[];
}

export interface NcclOpTotal {
  comm: string; // 16 hex digits
  comm_size: number;
  name: string;
  algorithm: string;
  protocol: string;
  ranks: number;
  calls: number;
  bytes: number;
  time_ns: number;
}

export interface NcclSummary {
  source: string;
  ranks: number;
  versions: string[];
  profiler_interfaces: number[];
  ops: NcclOpTotal[];
  nccl_peers_from: "network events" | "proxy operations" | "none reported";
  link_attribution: string;
  peers: { rank: number; comm: string; peer: number; sent: Traffic; received: Traffic }[];
  peers_total: number;
}

export interface GpuSummary {
  buffers: GpuBuffers;
  nccl: NcclSummary;
}
