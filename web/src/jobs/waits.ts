// Where the ranks wait (NETLOOM_WAITS, `netloom run --waits`): the agent
// times a barrier before every blocking collective and a probe before the
// receive of every MPI_Recv and MPI_Sendrecv, so each rank's MPI time splits into waiting for the last rank to
// arrive, waiting for late senders, the collectives' own time and the other
// MPI calls. Per rank as stacked bars, per function as MPInside's b_X
// columns beside X, and the ranks the others wait for named: the rank that
// waits least before collectives is the one that arrives last, the one
// everybody else waits for.
import { PALETTE } from "../chart";
import { h } from "../dom";
import * as fmt from "../format";
import { table } from "../table";
import type { Profile } from "./api";
import { LATE_COLOR, LATE_SEGMENT, LATE_SENDER, OTHER_COLOR, seconds, SETUP_FUNCTIONS, stackedRanks, WAIT_COLOR, WAIT_SEGMENT } from "./profile";

/** Blocking collectives the agent puts its barrier before (agent/gen's
 * waitsBefore; agent/README.md, "Wait states"). */
const WAITED = new Set([
  "MPI_Barrier",
  "MPI_Bcast",
  "MPI_Gather",
  "MPI_Gatherv",
  "MPI_Scatter",
  "MPI_Scatterv",
  "MPI_Allgather",
  "MPI_Allgatherv",
  "MPI_Alltoall",
  "MPI_Alltoallv",
  "MPI_Alltoallw",
  "MPI_Reduce",
  "MPI_Allreduce",
  "MPI_Reduce_scatter",
  "MPI_Reduce_scatter_block",
  "MPI_Scan",
  "MPI_Exscan",
]);

export const OWN_SEGMENT = "collectives' own time";
export const OTHER_SEGMENT = "other MPI";
/** Ranks named after the latest arrivers. */
const NEXT_NAMED = 3;
/** Ranks named in the headline; more are counted. */
const LATE_NAMED = 6;

export interface RankWait {
  rank: number;
  node: string;
  /** Seconds waiting for the last rank before collectives. */
  wait: number;
  /** Seconds waiting in MPI_Recv and MPI_Sendrecv for late senders. */
  lateSender: number;
  /** Seconds in the waited-for collectives themselves. */
  own: number;
  /** Seconds in the other MPI calls. */
  other: number;
  /** How much longer the other ranks waited than this one, summed (s):
   * Σ over ranks j of max(0, W_j − W_this). For the rank that arrives last
   * every time this is the others' whole wait for it. */
  beyond: number;
}

export interface WaitAnalysis {
  ranks: RankWait[];
  /** The latest arrivers: the ranks whose wait is within a tenth of the
   * spread of the least; empty when the waits hardly differ. */
  late: RankWait[];
  /** What the other ranks waited beyond the late ranks' mean wait (s). */
  othersWaited: number;
  /** Largest minus smallest wait over ranks (s). */
  spread: number;
  /** Whether a rank received with a function whose wait is for late senders. */
  hasLate: boolean;
  /** Those functions, and as words: "MPI_Recv and MPI_Sendrecv". */
  lateFns: string[];
  lateIn: string;
}

/** The function columns that are waited-for collectives: a covered
 * collective that was called, or any function but the late-sender ones a
 * rank waited before. */
function collectiveColumns(p: Profile): boolean[] {
  return p.functions.map((f, k) => !LATE_SENDER.has(f) && (WAITED.has(f) || (p.totals[k]?.wait_ns ?? 0) > 0));
}

/** Per-rank waits and who the others wait for; null without wait data. */
export function analyzeWaits(p: Profile, nodeOf: (rank: number) => string, includeSetup: boolean): WaitAnalysis | null {
  const w = p.wait_ns;
  if (!w || p.ranks.length === 0) return null;
  const coll = collectiveColumns(p);
  const counted = p.functions.map((f) => includeSetup || !SETUP_FUNCTIONS.includes(f));
  const ranks: RankWait[] = p.ranks.map((rank, i) => {
    let wait = 0;
    let lateSender = 0;
    let own = 0;
    let other = 0;
    p.functions.forEach((f, k) => {
      if (LATE_SENDER.has(f)) lateSender += w[i]?.[k] ?? 0;
      else wait += w[i]?.[k] ?? 0;
      const t = p.time_ns[i]?.[k] ?? 0;
      if (coll[k]) own += t;
      else if (counted[k]) other += t;
    });
    return { rank, node: nodeOf(rank), wait: wait / 1e9, lateSender: lateSender / 1e9, own: own / 1e9, other: other / 1e9, beyond: 0 };
  });
  const lateFns = p.functions.filter((f) => LATE_SENDER.has(f));
  const hasLate = lateFns.length > 0;
  const lateIn = lateFns.join(" and ");
  // beyond_k = Σ_{W_j > W_k} (W_j − W_k): suffix sums over the waits sorted
  // ascending, so 100k ranks stay O(n log n).
  const order = ranks.map((_, i) => i).sort((a, b) => ranks[a]!.wait - ranks[b]!.wait || ranks[a]!.rank - ranks[b]!.rank);
  let suffix = 0;
  let above = 0;
  for (let j = order.length - 1; j >= 0; ) {
    // Equal waits share one answer: none waited longer than the other.
    let i = j;
    while (i > 0 && ranks[order[i - 1]!]!.wait === ranks[order[j]!]!.wait) i--;
    const wk = ranks[order[j]!]!.wait;
    for (let m = i; m <= j; m++) ranks[order[m]!]!.beyond = Math.max(0, suffix - above * wk);
    for (let m = i; m <= j; m++) suffix += ranks[order[m]!]!.wait;
    above += j - i + 1;
    j = i - 1;
  }
  const min = ranks[order[0]!]!.wait;
  const max = ranks[order[order.length - 1]!]!.wait;
  const spread = max - min;
  // Waits that differ by under a millisecond or a tenth of the largest wait
  // name nobody: the last to arrive changes from call to call (or there is
  // one rank).
  if (ranks.length < 2 || spread < Math.max(1e-3, 0.1 * max)) return { ranks, late: [], othersWaited: 0, spread, hasLate, lateFns, lateIn };
  const late = order.filter((i) => ranks[i]!.wait - min <= 0.1 * spread).map((i) => ranks[i]!);
  const lateSet = new Set(late);
  const lateMean = late.reduce((a, r) => a + r.wait, 0) / late.length;
  const othersWaited = ranks.reduce((a, r) => (lateSet.has(r) ? a : a + Math.max(0, r.wait - lateMean)), 0);
  return { ranks, late, othersWaited, spread, hasLate, lateFns, lateIn };
}

const who = (r: RankWait) => `${r.rank} (${r.node || "?"})`;

/** The panel's body: the hint without wait data, else the late ranks, the
 * stacked bars per rank and the tables per rank and per function. */
export function waitsView(p: Profile, nodeOf: (rank: number) => string, includeSetup: boolean): HTMLElement {
  const a = analyzeWaits(p, nodeOf, includeSetup);
  if (!a) {
    const el = h(
      "p",
      { class: "panel-note waits-hint" },
      "No wait data: the job ran without ",
      h("code", {}, "netloom run --waits"),
      " (",
      h("code", {}, "NETLOOM_WAITS=1"),
      ") or made no blocking collective call and no MPI_Recv or MPI_Sendrecv. Run it with waits to split each collective's time into waiting for the last rank and the collective itself, and each receive's into waiting for a late sender and the receive itself.",
    );
    el.dataset.waits = "0";
    return el;
  }
  const total = (f: (r: RankWait) => number) => a.ranks.reduce((s, r) => s + f(r), 0);
  const [tw, tl, to, tx] = [total((r) => r.wait), total((r) => r.lateSender), total((r) => r.own), total((r) => r.other)];
  const mpi = tw + tl + to + tx;

  let headline: HTMLElement;
  if (a.late.length === 0) {
    headline = h("p", { class: "panel-note waits-late" }, `No rank keeps the others waiting: the ranks' waits before collectives differ by ${seconds(a.spread)} at most.`);
  } else {
    const lateSet = new Set(a.late);
    const named = a.late.slice(0, LATE_NAMED).map(who).join(", ");
    const more = a.late.length > LATE_NAMED ? ` and ${a.late.length - LATE_NAMED} more` : "";
    const others = a.ranks.length - a.late.length;
    const one = a.late.length === 1;
    const next = a.ranks
      .filter((r) => !lateSet.has(r) && r.beyond > 0)
      .sort((x, y) => x.wait - y.wait || x.rank - y.rank)
      .slice(0, NEXT_NAMED);
    headline = h(
      "p",
      { class: "panel-note waits-late" },
      h("strong", {}, `${one ? "Rank" : "Ranks"} ${named}${more} ${one ? "arrives" : "arrive"} last`),
      `: the other ${fmt.count(others)} rank${others === 1 ? "" : "s"} waited ${seconds(a.othersWaited)} for ${one ? "it" : "them"} in all.`,
      next.length ? ` Next latest: ${next.map((r) => `rank ${who(r)}, others waited ${seconds(r.beyond)} longer than it`).join("; ")}.` : "",
    );
    headline.dataset.late = a.late.map((r) => r.rank).join(",");
    headline.dataset.othersWaited = String(a.othersWaited);
  }
  // The late senders: the rank that waited longest for its messages.
  let lateHead: HTMLElement | null = null;
  if (a.hasLate) {
    const most = a.ranks.reduce((m, r) => (r.lateSender > m.lateSender ? r : m), a.ranks[0]!);
    lateHead =
      most.lateSender >= 1e-3
        ? h("p", { class: "panel-note waits-late-sender" }, h("strong", {}, `Rank ${who(most)} waited longest for late senders`), `: ${seconds(most.lateSender)} in ${a.lateIn} until the message was sent; all ranks ${seconds(tl)}.`)
        : h("p", { class: "panel-note waits-late-sender" }, `No rank waited for late senders: ${seconds(tl)} in all ranks' ${a.lateIn} before the message came.`);
    lateHead.dataset.rank = String(most.rank);
    lateHead.dataset.lateSender = String(tl);
  }
  const explain = h(
    "p",
    { class: "panel-note hint" },
    "A rank's wait is its time in the barrier the agent puts before each blocking collective, until the last rank arrives: the rank that waits least arrives last, and the others wait for it. ",
    a.hasLate ? `Its wait for late senders is its time in the probe the agent puts before each receive of ${a.lateIn}, until the message it receives was sent. ` : "",
    `Over all ranks ${seconds(tw)} waiting before collectives, ${a.hasLate ? `${seconds(tl)} for late senders, ` : ""}${seconds(to)} in the collectives themselves, ${seconds(tx)} in other MPI calls (${fmt.pct(mpi > 0 ? (100 * (tw + tl)) / mpi : 0)} of MPI time waiting).`,
  );

  const col = (f: (r: RankWait) => number) => Float64Array.from(a.ranks, f);
  const chart = stackedRanks(
    p.ranks,
    [
      { name: WAIT_SEGMENT, color: WAIT_COLOR, values: col((r) => r.wait) },
      ...(a.hasLate ? [{ name: LATE_SEGMENT, color: LATE_COLOR, values: col((r) => r.lateSender) }] : []),
      { name: OWN_SEGMENT, color: PALETTE[0]!, values: col((r) => r.own) },
      { name: OTHER_SEGMENT, color: OTHER_COLOR, values: col((r) => r.other) },
    ],
    `MPI time per rank: waiting before collectives, ${a.hasLate ? "waiting for late senders, " : ""}the collectives, other MPI`,
  );
  chart.classList.add("waits-chart");

  const lateRanks = new Set(a.late.map((r) => r.rank));
  const perRank = table<RankWait>({
    label: "Wait per rank",
    param: "w",
    rows: a.ranks,
    defaultSort: "wait",
    defaultDir: "asc",
    pageSize: 16,
    empty: "No rank has reported yet.",
    rowClass: (r) => (lateRanks.has(r.rank) ? "chosen" : ""),
    columns: [
      { key: "rank", label: "Rank", value: (r) => r.rank, numeric: true },
      { key: "node", label: "Node", value: (r) => r.node },
      { key: "wait", label: "Wait before collectives", value: (r) => r.wait, cell: (r) => seconds(r.wait), numeric: true, title: "Waiting for the last rank to arrive, all collectives" },
      ...(a.hasLate ? [{ key: "late", label: "Late senders", value: (r: RankWait) => r.lateSender, cell: (r: RankWait) => seconds(r.lateSender), numeric: true, title: `Waiting in ${a.lateIn} for the message to be sent (${a.lateFns.map(bName).join(", ")})` }] : []),
      { key: "own", label: "Collectives (own)", value: (r) => r.own, cell: (r) => seconds(r.own), numeric: true, title: "The collectives' own time, every rank present" },
      { key: "other", label: "Other MPI", value: (r) => r.other, cell: (r) => seconds(r.other), numeric: true },
      { key: "pct", label: "Waiting", value: (r) => waitShare(r), cell: (r) => fmt.pct(waitShare(r)), numeric: true, title: "Of the rank's MPI time, waiting before collectives or for late senders" },
      { key: "beyond", label: "Others waited longer", value: (r) => r.beyond, cell: (r) => seconds(r.beyond), numeric: true, title: "How much longer the other ranks waited than this one, summed: large for the ranks that arrive last" },
    ],
  });

  interface FunctionWait {
    name: string;
    calls: number;
    wait: number;
    own: number;
    most: { rank: number; wait: number };
  }
  const coll = collectiveColumns(p);
  const fns: FunctionWait[] = [];
  p.functions.forEach((name, k) => {
    const t = p.totals[k];
    if (!coll[k] || !t || t.calls === 0) return;
    let most = { rank: -1, wait: -1 };
    p.wait_ns!.forEach((row, i) => {
      const v = (row[k] ?? 0) / 1e9;
      if (v > most.wait) most = { rank: p.ranks[i]!, wait: v };
    });
    fns.push({ name, calls: t.calls, wait: (t.wait_ns ?? 0) / 1e9, own: t.time_ns / 1e9, most });
  });
  const perFunction = table<FunctionWait>({
    label: "Wait per collective",
    param: "wf",
    rows: fns,
    defaultSort: "wait",
    defaultDir: "desc",
    pageSize: 15,
    empty: "No blocking collective was called.",
    columns: [
      { key: "name", label: "Collective", value: (x) => x.name, cell: (x) => h("code", {}, x.name) },
      { key: "b", label: "Wait column", value: (x) => bName(x.name), cell: (x) => h("code", {}, bName(x.name)), title: "MPInside's name for the wait before it" },
      { key: "calls", label: "Calls", value: (x) => x.calls, cell: (x) => fmt.count(x.calls), numeric: true, title: "Summed over ranks" },
      { key: "wait", label: "Wait", value: (x) => x.wait, cell: (x) => seconds(x.wait), numeric: true, title: "Waiting for the last rank before it, summed over ranks" },
      { key: "own", label: "Own time", value: (x) => x.own, cell: (x) => seconds(x.own), numeric: true, title: "The collective itself, summed over ranks" },
      { key: "pct", label: "Waiting", value: (x) => share(x.wait, x.wait + x.own), cell: (x) => fmt.pct(share(x.wait, x.wait + x.own)), numeric: true, title: "Of its wait and own time" },
      { key: "most", label: "Waits most", value: (x) => x.most.wait, cell: (x) => (x.most.rank < 0 ? "–" : `rank ${x.most.rank} · ${seconds(x.most.wait)}`), numeric: true },
    ],
  });

  const el = h(
    "div",
    { class: "waits" },
    headline,
    ...(lateHead ? [lateHead] : []),
    explain,
    h("div", { class: "profile-box" }, chart),
    h("h3", { class: "sub-head" }, "Per rank, least wait first"),
    perRank,
    h("h3", { class: "sub-head" }, "Per collective"),
    perFunction,
  );
  el.dataset.waits = "1";
  return el;
}

/** MPInside's column for a function's wait: MPI_Allreduce → b_allreduce
 * (before a collective), MPI_Recv → w_recv (for a late sender). */
export function bName(f: string): string {
  return `${LATE_SENDER.has(f) ? "w" : "b"}_${f.replace(/^MPI_/, "").toLowerCase()}`;
}

function waitShare(r: RankWait): number {
  return share(r.wait + r.lateSender, r.wait + r.lateSender + r.own + r.other);
}

function share(part: number, whole: number): number {
  return whole > 0 ? (100 * part) / whole : 0;
}
