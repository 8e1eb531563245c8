// One shared EventSource on /api/v1/fabric/stream for the whole app: the
// header's live indicator, the map's colours and live pages' refreshes all
// subscribe here. The stream is the fabric's: administrators only.
import type { SweepMessage } from "./api";
import { isAdmin } from "./api";

type SweepListener = (m: SweepMessage) => void;
type TopologyListener = (version: number) => void;

const sweepListeners = new Set<SweepListener>();
const topoListeners = new Set<TopologyListener>();
let source: EventSource | null = null;
let last: SweepMessage | null = null;
let statusListener: (ok: boolean) => void = () => {};

function open(): void {
  if (source) return;
  source = new EventSource("/api/v1/fabric/stream");
  source.addEventListener("sweep", (e) => {
    const m = JSON.parse((e as MessageEvent<string>).data) as SweepMessage;
    last = m;
    for (const l of [...sweepListeners]) l(m);
  });
  source.addEventListener("topology", (e) => {
    const v = (JSON.parse((e as MessageEvent<string>).data) as { version: number }).version;
    for (const l of [...topoListeners]) l(v);
  });
  source.addEventListener("open", () => statusListener(true));
  source.addEventListener("error", () => statusListener(false));
}

function maybeClose(): void {
  if (sweepListeners.size === 0 && topoListeners.size === 0 && source) {
    source.close();
    source = null;
  }
}

/** Calls fn with the latest sweep now (if known) and after every sweep
 * until signal aborts. */
export function onSweep(fn: SweepListener, signal: AbortSignal, replay = true): void {
  sweepListeners.add(fn);
  signal.addEventListener("abort", () => {
    sweepListeners.delete(fn);
    maybeClose();
  });
  open();
  if (replay && last) fn(last);
}

export function onTopology(fn: TopologyListener, signal: AbortSignal): void {
  topoListeners.add(fn);
  signal.addEventListener("abort", () => {
    topoListeners.delete(fn);
    maybeClose();
  });
  open();
}

export function onStreamStatus(fn: (ok: boolean) => void): void {
  statusListener = fn;
}

export function lastSweep(): SweepMessage | null {
  return last;
}

/** Decodes the base64 arrays of a sweep message. */
export function decode(b64: string): Uint8Array<ArrayBuffer> {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** Re-runs fn on every sweep while live, at most every minMs; for a
 * regular user, who has no fabric stream, every minMs. */
export function refreshOnSweep(fn: () => void, signal: AbortSignal, minMs = 5000): void {
  if (!isAdmin()) {
    const timer = setInterval(fn, minMs);
    signal.addEventListener("abort", () => clearInterval(timer));
    return;
  }
  let lastRun = Date.now();
  onSweep(
    () => {
      if (Date.now() - lastRun < minMs) return;
      lastRun = Date.now();
      fn();
    },
    signal,
    false,
  );
}
