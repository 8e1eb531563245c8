// Typed access to the daemon's JSON API (docs/api.md), and the one place
// that knows about the login: every request goes through request(), which
// sends the session's CSRF token with state-changing requests and, when the
// daemon answers 401, forgets the session and sends the browser to the
// login page (coming back afterwards).
import { redirect } from "./router";

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
    /** The daemon's short machine-readable cause ("bad_login",
     * "unauthenticated", "forbidden", …), when it gave one. */
    public reason = "",
  ) {
    super(message);
  }
}

/** Who is signed in (GET /api/v1/auth/me). role is what they may see;
 * method is how they proved it ("password", "proxy", "token", or
 * "anonymous" when the daemon lets everyone in). */
export interface Session {
  user: string;
  role: "admin" | "user";
  method: string;
  csrf_token?: string;
}

let session: Session | null = null;
const sessionListeners = new Set<(s: Session | null) => void>();

export function currentSession(): Session | null {
  return session;
}

export function setSession(s: Session | null): void {
  session = s;
  for (const l of [...sessionListeners]) l(s);
}

export function onSession(fn: (s: Session | null) => void): void {
  sessionListeners.add(fn);
}

/** Whether the signed-in principal sees the whole fabric. */
export function isAdmin(): boolean {
  return session?.role === "admin";
}

export const LOGIN_PATH = "/login";

/** The login page's address, coming back to `back` (default: here). */
export function loginHref(back = location.pathname + location.search + location.hash): string {
  return back === "/" || back.startsWith(LOGIN_PATH) ? LOGIN_PATH : `${LOGIN_PATH}?next=${encodeURIComponent(back)}`;
}

type Params = Record<string, string | number | undefined>;

interface RequestOptions {
  params?: Params;
  body?: unknown;
  signal?: AbortSignal;
  /** Leave a 401 to the caller instead of going to the login page (the
   * login form itself, the first who-am-I). */
  noLoginRedirect?: boolean;
}

export async function request<T>(method: "GET" | "POST" | "PUT" | "DELETE", path: string, opt: RequestOptions = {}): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(opt.params ?? {})) if (v !== undefined && v !== "") q.set(k, String(v));
  const qs = q.toString();
  const headers: Record<string, string> = { Accept: "application/json" };
  if (method !== "GET" && session?.csrf_token) headers["X-CSRF-Token"] = session.csrf_token;
  if (opt.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`/api/v1${path}${qs ? "?" + qs : ""}`, {
    method,
    signal: opt.signal,
    headers,
    credentials: "same-origin",
    body: opt.body === undefined ? undefined : JSON.stringify(opt.body),
  });
  if (!res.ok) {
    let msg = `${res.status} ${res.statusText}`;
    let reason = "";
    try {
      const body = (await res.json()) as { error?: string; reason?: string };
      if (body.error) msg = body.error;
      if (body.reason) reason = body.reason;
    } catch {
      /* not JSON */
    }
    if (res.status === 401 && !opt.noLoginRedirect) {
      setSession(null);
      if (location.pathname !== LOGIN_PATH) redirect(loginHref());
    }
    throw new ApiError(res.status, msg, reason);
  }
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

export function get<T>(path: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  return request<T>("GET", path, { params, signal });
}

export function post<T>(path: string, body?: unknown, opt: Omit<RequestOptions, "body"> = {}): Promise<T> {
  return request<T>("POST", path, { ...opt, body });
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
  /** The ends' port names where the fabric gives them (Ethernet: "swp1"). */
  a_name?: string;
  b_name?: string;
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
  /** The node's fabric, in a view of several (docs/postgres.md). */
  fabric?: string;
  /** Port names by port number where the fabric gives them ("" where none). */
  port_names?: string[];
}

export interface Direction {
  from: PortRef;
  to: PortRef;
  from_description: string;
  to_description: string;
  from_name?: string;
  to_name?: string;
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

/** GET /ports/{guid:port}/counters. */
export interface PortCounters {
  from: string;
  to: string;
  series: Series;
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
  /** The port's name where the fabric gives one (Ethernet: "swp1"). */
  name?: string;
  lid?: number;
  link?: Link;
  peer?: PortRef;
  peer_description?: string;
  peer_name?: string;
  rates?: Record<string, number>;
  unreachable?: boolean;
  /** The link's other end's latest rates, when that end was read. */
  peer_rates?: Record<string, number>;
  /** Why a linked port has no rates of its own. */
  no_rates?: "not_swept" | "unreachable" | "first_sweep" | "no_sample";
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
  port_name?: string;
  peer?: PortRef;
  peer_node?: string;
  peer_name?: string;
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
  /** Link j's ends' names at 2j and 2j+1 where the fabric names its ports ("" where not); absent on InfiniBand. */
  port_names?: string[];
  capacity: number[];
  compute_ms: number;
  /** A view of several fabrics: their names, and each node's index in them. */
  fabrics?: string[];
  fabric?: number[];
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
