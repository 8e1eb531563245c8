// ECMP collisions the job is in (GET /jobs/{job}/why's collisions,
// docs/sflow.md): large flows sharing one uplink of a switch while an
// equal-cost uplink of it carried less, seen by the switches' sFlow
// samples. Shown only when there is one: the shared uplink, the flows on
// it (job, ranks, hosts; each job linked to its page), every uplink of the
// group with what its counters measured, and the group's imbalance. The hot-spots page
// (pages/hotspots.ts) shows the fabric's collisions with the same view.
import { get } from "../../api";
import { h, link, panel } from "../../dom";
import * as fmt from "../../format";
import { table } from "../../table";
import { jobPath } from "../api";
import type { JobContext, JobPanel } from "./context";

export interface CollisionFlow {
  job?: string;
  user?: string;
  other_traffic?: boolean;
  ambiguous?: boolean;
  anonymized?: boolean;
  src_rank?: number;
  dst_rank?: number;
  src_node?: string;
  dst_node?: string;
  src?: string;
  dst?: string;
  src_port?: number;
  dst_port?: number;
  estimated_bytes: number;
  samples: number;
}

export interface GroupPort {
  port: number;
  link: string;
  to_description: string;
  measured_bytes: number;
  measured: boolean;
  measured_utilization_pct: number;
  estimated_bytes: number;
  samples: number;
  flows: number;
}

export interface Collision {
  switch: string;
  switch_description: string;
  port: number;
  link: string;
  to_description: string;
  flows: CollisionFlow[];
  jobs: string[];
  group: GroupPort[];
  least_loaded: GroupPort;
  imbalance: number;
  imbalance_basis: "counters" | "samples";
}

/** Who a flow is: its job (or other traffic) and its ranks. */
export function flowWho(f: CollisionFlow): string {
  if (f.other_traffic) return "other traffic (no job)";
  if (f.ambiguous) return "several jobs' hosts";
  const ranks = f.src_rank !== undefined && f.dst_rank !== undefined ? `, rank ${f.src_rank} → ${f.dst_rank}` : "";
  return `job ${f.job ?? "?"}${ranks}`;
}

/** A flow's "who" with its job linked to the job's page (another user's
 * job, "other-N", names no page a user may open). */
function flowCell(f: CollisionFlow): Node | string {
  const who = flowWho(f);
  if (!f.job || f.other_traffic || f.ambiguous || f.anonymized) return who;
  const name = `job ${f.job}`;
  return h("span", {}, "job ", link(`/jobs/${encodeURIComponent(f.job)}`, f.job), who.slice(name.length));
}

/** The sentence that says a collision: the shared uplink, its flows, the
 * least loaded uplink of the group and the imbalance. */
export function collisionText(c: Collision): string {
  const by = c.imbalance_basis === "counters" ? "by the switch counters" : "by the sFlow samples";
  const load = (g: GroupPort) => fmt.bytes(c.imbalance_basis === "counters" ? g.measured_bytes : g.estimated_bytes);
  const shared = c.group.find((g) => g.port === c.port);
  return `${c.switch_description} → ${c.to_description} carried ${c.flows.length} large flows (${shared ? load(shared) : "?"}) while ${c.switch_description} → ${c.least_loaded.to_description} carried ${load(c.least_loaded)}: imbalance ${c.imbalance.toFixed(2)} (largest uplink ÷ mean of the ${c.group.length} equal-cost uplinks, ${by})`;
}

/** One collision: its sentence, its flows and its group. */
export function collisionView(c: Collision): HTMLElement {
  return h(
    "div",
    { class: "collision" },
    h("p", { class: "collision-text warn-text" }, collisionText(c)),
    table<CollisionFlow>({
      columns: [
        { key: "who", label: "Flow", value: (f) => flowWho(f), cell: flowCell },
        { key: "hosts", label: "Hosts", value: (f) => (f.src_node && f.dst_node ? `${f.src_node} → ${f.dst_node}` : "") },
        { key: "addr", label: "Addresses", value: (f) => (f.src ? `${f.src}:${f.src_port} → ${f.dst}:${f.dst_port}` : "") },
        { key: "bytes", label: "Estimated", value: (f) => f.estimated_bytes, cell: (f) => fmt.bytes(f.estimated_bytes), numeric: true, title: "Sampled frame bytes × sampling rate" },
        { key: "samples", label: "Samples", value: (f) => f.samples, cell: (f) => fmt.count(f.samples), numeric: true },
      ],
      rows: c.flows,
      defaultSort: "bytes",
      param: "cf",
      empty: "No flows",
      label: "Flows on the shared uplink",
    }),
    table<GroupPort>({
      columns: [
        { key: "to", label: "Uplink to", value: (g) => `${c.switch_description} → ${g.to_description}${g.port === c.port ? " (shared)" : ""}` },
        { key: "measured", label: "Measured", value: (g) => g.measured_bytes, cell: (g) => (g.measured ? fmt.bytes(g.measured_bytes) : "–"), numeric: true, title: "What the switch's counters say it sent over the range" },
        { key: "util", label: "Utilization", value: (g) => g.measured_utilization_pct, cell: (g) => fmt.pct(g.measured_utilization_pct), numeric: true },
        { key: "flows", label: "Large flows", value: (g) => g.flows, cell: (g) => fmt.count(g.flows), numeric: true },
      ],
      rows: c.group,
      defaultSort: "measured",
      param: "cg",
      empty: "No uplinks",
      label: "The switch's equal-cost uplinks",
    }),
  );
}

export function collisionsPanel(ctx: JobContext): JobPanel & { el: HTMLElement } {
  const box = h("div", {}, "");
  const el = panel("ECMP collisions (sFlow)", box);
  el.classList.add("collisions-panel");
  el.hidden = true;
  return {
    el,
    async load() {
      const r = await get<{ collisions?: Collision[] }>(jobPath(ctx.id, "/why"), { limit: 1 }, ctx.signal);
      const cs = r.collisions ?? [];
      el.hidden = cs.length === 0;
      box.replaceChildren(...cs.map(collisionView));
    },
  };
}
