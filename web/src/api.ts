// Typed access to the daemon's JSON API (docs/api.md).

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function get<T>(path: string, params: Record<string, string | number | undefined> = {}, signal?: AbortSignal): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const qs = q.toString();
  const res = await fetch(`/api/v1${path}${qs ? "?" + qs : ""}`, { signal, headers: { Accept: "application/json" } });
  if (!res.ok) {
    let msg = `${res.status} ${res.statusText}`;
    try {
      const body = (await res.json()) as { error?: string };
      if (body.error) msg = body.error;
    } catch {
      /* not JSON */
    }
    throw new ApiError(res.status, msg);
  }
  return (await res.json()) as T;
}

export interface PortRef {
  guid: string;
  port: number;
}

export const portId = (p: PortRef): string => `${p.guid}:${p.port}`;

export interface Link {
  id: string;
  a: PortRef;
  b: PortRef;
  width: string;
  speed: string;
  state: string;
  capacity_bytes_per_second: number;
}

export interface FabricNode {
  guid: string;
  type: "switch" | "ca" | "router";
  description: string;
  lid: number;
  ports: number;
}

export interface Direction {
  from: PortRef;
  to: PortRef;
  from_description: string;
  to_description: string;
  bytes_per_second: number;
  utilization_pct: number;
  xmit_wait: number;
  errors: number;
  measured: boolean;
}

export interface LinkResponse {
  version: number;
  at: string;
  link: Link;
  directions: [Direction, Direction];
}

export interface Series {
  port: PortRef;
  time: number[];
  span_seconds: number[];
  resets: number[];
  saturated: number[];
  delta: Record<string, number[]>;
  rate: Record<string, number[]>;
}

export interface LinkCounters {
  link: Link;
  from: string;
  to: string;
  series: [Series, Series];
}

export interface Pair {
  src_lid: number;
  dst_lid: number;
}

export interface LinkRoutes {
  link: Link;
  directions: { from: PortRef; to: PortRef; total: number; pairs: Pair[] }[];
}

export interface NodePort {
  port: number;
  lid?: number;
  link?: Link;
  peer?: PortRef;
  peer_description?: string;
  rates?: Record<string, number>;
  unreachable?: boolean;
}

export interface NodeResponse {
  version: number;
  at: string;
  node: FabricNode;
  ports: NodePort[];
}

export interface NodeCounters {
  node: FabricNode;
  from: string;
  to: string;
  series: Series[];
}

export interface FabricEvent {
  time: string;
  kind: string;
  guid?: string;
  port?: number;
  detail: string;
}

export interface ErrorPort {
  port: PortRef;
  node: string;
  peer?: PortRef;
  peer_node?: string;
  link?: string;
  total: number;
  counters: Record<string, number>;
  last: string;
}

export interface ErrorsResponse {
  from: string;
  to: string;
  min: number;
  total: number;
  ports: ErrorPort[];
}

export interface Layout {
  version: number;
  levels: number;
  guid: string[];
  name: string[];
  type: number[];
  lid: number[];
  level: number[];
  x: number[];
  y: number[];
  group: number[];
  edges: number[];
  ports: number[];
  capacity: number[];
  compute_ms: number;
}

export interface SweepMessage {
  version: number;
  sweep: number;
  time: number;
  links: number;
  nodes: number;
  util: string;
  errors: string;
  error_nodes: number;
}

export const ERROR_COUNTERS = [
  "symbol_errors",
  "link_recovers",
  "link_downed",
  "rcv_errors",
  "rcv_remote_phys_errors",
  "rcv_switch_relay_errors",
  "xmit_discards",
  "xmit_constraint_errors",
  "rcv_constraint_errors",
  "link_integrity_errors",
  "excessive_buffer_overrun_errors",
  "vl15_dropped",
];

/** Nodes of a topology version, fetched once, for LID → name look-ups. */
const nodeCache = new Map<string, Promise<FabricNode[]>>();
export function nodesAt(at: Record<string, string>): Promise<FabricNode[]> {
  const key = JSON.stringify(at);
  let p = nodeCache.get(key);
  if (!p) {
    p = get<{ nodes: FabricNode[] }>("/fabric/nodes", at).then((r) => r.nodes);
    nodeCache.set(key, p);
    p.catch(() => nodeCache.delete(key));
  }
  return p;
}
