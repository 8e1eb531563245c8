// What the job page's panels share: the job, the time range, the view's
// state in the address (matrix class and metric, the histogram's rank, the
// profile's options) and the job's detail as last loaded. Each panel is a
// module of its own (this folder); the page (pages/job.ts) lays them out
// and drives their loading.
import { isAdmin } from "../../api";
import { h, loading, panel } from "../../dom";
import * as fmt from "../../format";
import { table } from "../../table";
import type { Column, TableOptions } from "../../table";
import type { Classes, JobDetail, Traffic } from "../api";
import { setQuery } from "../../router";
import { readTime, timeQuery } from "../../time";
import type { TimeView } from "../../time";

/** The communication matrix's traffic classes. */
export const CLASSES: [string, string][] = [
  ["p2p", "Point-to-point"],
  ["coll", "Collective"],
  ["rma", "One-sided"],
  ["all", "All"],
];

/** The communication matrix's metrics. */
export const METRICS: [string, string][] = [
  ["bytes", "Bytes"],
  ["msgs", "Messages"],
];

/** The page's view state, kept in the query string. */
export interface JobView {
  mclass: string;
  mmetric: string;
  hrank: string;
  setup: boolean;
  outside: boolean;
}

export interface JobContext {
  /** The job's id. */
  id: string;
  t: TimeView;
  /** The time range as a query string ("" live, else "?..."). */
  tq: string;
  signal: AbortSignal;
  /** Whether the visitor is an administrator (node pages, the map). */
  admin: boolean;
  view: JobView;
  /** Writes the view's state into the address. */
  saveView(): void;
  /** The job's detail as last loaded; null before the first load. */
  detail(): JobDetail | null;
}

/** A panel of the job page: its elements, and what it does with the job's
 * detail (each refresh) and with its own request. */
export interface JobPanel {
  /** Shows what the job's detail says, when it is (re)loaded. */
  show?(d: JobDetail): void;
  /** Fetches and draws the panel's own figures. */
  load?(): Promise<void>;
}

/** The context of the job page at this address. */
export function jobContext(id: string, search: URLSearchParams, signal: AbortSignal, detail: () => JobDetail | null): JobContext {
  const t = readTime();
  const view: JobView = {
    mclass: CLASSES.some(([c]) => c === search.get("mclass")) ? search.get("mclass")! : "p2p",
    mmetric: search.get("mmetric") === "msgs" ? "msgs" : "bytes",
    hrank: search.get("hrank") ?? "",
    setup: search.get("setup") === "1",
    outside: search.get("outside") === "1",
  };
  const saveView = () => {
    const q = new URLSearchParams(location.search);
    const put = (k: string, v: string, def: string) => (v === def ? q.delete(k) : q.set(k, v));
    put("mclass", view.mclass, "p2p");
    put("mmetric", view.mmetric, "bytes");
    put("hrank", view.hrank, "");
    put("setup", view.setup ? "1" : "0", "0");
    put("outside", view.outside ? "1" : "0", "0");
    setQuery(q);
  };
  return { id, t, tq: timeQuery(t), signal, admin: isAdmin(), view, saveView, detail };
}

/** An error's message. */
export const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The columns of what a node or a rank sent: in all, by locality and by
 * class (the nodes' and processes' tables). */
export function bytesColumns<T extends { total: Traffic; inter_node: Traffic; intra_node: Traffic; traffic: Classes }>(): Column<T>[] {
  return [
    { key: "sent", label: "Sent", value: (x) => x.total.bytes, cell: (x) => fmt.bytes(x.total.bytes), numeric: true },
    { key: "inter", label: "Inter-node", value: (x) => x.inter_node.bytes, cell: (x) => fmt.bytes(x.inter_node.bytes), numeric: true },
    { key: "intra", label: "Intra-node", value: (x) => x.intra_node.bytes, cell: (x) => fmt.bytes(x.intra_node.bytes), numeric: true },
    { key: "p2p", label: "P2P", value: (x) => x.traffic.p2p.bytes, cell: (x) => fmt.bytes(x.traffic.p2p.bytes), numeric: true },
    { key: "coll", label: "Coll", value: (x) => x.traffic.coll.bytes, cell: (x) => fmt.bytes(x.traffic.coll.bytes), numeric: true },
    { key: "rma", label: "RMA", value: (x) => x.traffic.rma.bytes, cell: (x) => fmt.bytes(x.traffic.rma.bytes), numeric: true },
  ];
}

/** A panel holding one table drawn from the job's detail (its nodes, its
 * processes), loading until the detail comes. */
export function detailTable<T>(title: string, waiting: string, options: (d: JobDetail) => TableOptions<T>): JobPanel & { el: HTMLElement } {
  const box = h("div", {}, loading(waiting));
  return {
    el: panel(title, box),
    show: (d: JobDetail) => box.replaceChildren(table<T>(options(d))),
  };
}
